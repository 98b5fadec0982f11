"""Trained weights and the papers' constructions: a trained ICL-MC run against Proposition 2.1
(:mod:`.trained_vs_prop21`), the constructions against their exact limits (:mod:`.construction_limits`), and
the logit space both read out into (:mod:`~induction_probes.probes.progress.logit_space`)."""
