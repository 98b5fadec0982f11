"""Training: the minibatch trainer of every recipe with exact resume (:mod:`.train`), and the toy model's
full-batch loop (:mod:`.toy`)."""
