"""induction-probes: the face of the package. The command line is :mod:`induction_probes.cli`; the library
is :mod:`circuits` (tasks, models, training, constructions) and :mod:`probes` (measurements)."""
