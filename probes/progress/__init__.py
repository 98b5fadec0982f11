"""What has formed, read from the weights: the two-layer circuit's progress measures (:mod:`.progress_measures`),
the weights' norms and distances moved (:mod:`.weight_norms`), and when a threshold crossing means little
(:mod:`.crossing_caveats`)."""
