"""The ICL-MC probe of a language model (Edelman et al. 2024): the chains written in k of its tokens
(:mod:`.markov_protocol`), what is measured on them (:mod:`.markov_measure`), the probe and its verdict
(:mod:`.markov_probe`) and its figures (:mod:`.markov_plots`)."""
