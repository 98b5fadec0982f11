"""Attention probes, read from each layer's ``hook_pattern``: the patterns themselves and the head scores
(:mod:`.patterns`), the registered probes run on every checkpoint (:mod:`.scores`) and their registry
(:mod:`.probe_registry`)."""
