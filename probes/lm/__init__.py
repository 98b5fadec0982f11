"""Induction-head probes of language models booted through TransformerLens's ``TransformerBridge``:
head scores (:mod:`.measure`), the protocols of Olsson et al. 2022 (:mod:`.protocols`), head ablation
(:mod:`.ablate_heads`) and checkpoint series (:mod:`.series`)."""
