"""Sweeps: a grid of recipes over seeds from a TOML spec (:mod:`.sweep_spec`), run by :mod:`.sweep_runner` (one cell:
:mod:`.cells`; on Ray: :mod:`.ray_backend`), and the named experiments of the command line (:mod:`.experiment_runs`)."""
