"""Training: the minibatch trainer of every recipe with exact resume (:mod:`.train_loop`), and the toy model's
full-batch loop (:mod:`.toy_training`)."""
