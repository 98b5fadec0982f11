"""Wang et al.'s Gaussian induction task: the config (:mod:`.task`) and its sequences and targets
(:mod:`.sequences`)."""
