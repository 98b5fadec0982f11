"""What a model predicts: per-position loss and KL to the truth and to each strategy, the ICL score and a
run's phases (:mod:`.icl_behaviour`), the loss on chains of a named prior (:mod:`.by_prior`), and what a
Gaussian-task model's first layer writes (:mod:`.window_readout`)."""
