"""The figures: a run's training curves and probes, its circuit beside Proposition 2.1, and the toy model's phases."""
