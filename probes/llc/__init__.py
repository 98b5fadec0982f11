"""The local learning coefficient: a calibrated estimator for any model and loss (:mod:`.estimator`), models
with a known coefficient to calibrate it on (:mod:`.calibration`), and ICL-MC checkpoints' (:mod:`.checkpoint_llc`)."""
