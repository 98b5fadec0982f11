"""Wang et al.'s Gaussian induction task: the config (:mod:`.gaussian_task`) and its sequences and targets
(:mod:`.sequences`)."""
