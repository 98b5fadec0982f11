"""Hand-made weights, as pure functions that return a config and a state dict for our HookedTransformer:
Edelman et al.'s Proposition 2.1 (:mod:`.edelman`) and Wang et al.'s induction heads (:mod:`.wang`)."""

from induction_probes.circuits.constructions.edelman import empirical_bigram, prop21, prop21_limit
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.constructions.wang import wang_ih2, wang_ihn

__all__ = ["empirical_bigram", "load_construction", "prop21", "prop21_limit", "wang_ih2", "wang_ihn"]
