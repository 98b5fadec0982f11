"""ICL-MC (Edelman et al. 2024): the task config (:mod:`.markov_task`), its parameters' names and checks
(:mod:`.parameters`), the priors over chains, the chains, their streams and the in-context strategies."""
