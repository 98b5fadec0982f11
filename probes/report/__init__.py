"""The report: the text, figures and HTML page that ``probe``, ``ablate``, ``report`` and ``verify`` show,
as functions of plain arguments (a run, its steps, a probe set's size and seed, a device, a folder), so that
a notebook gets what the command line prints. It reads runs and probes them but never trains, so it sits in
the probes layer, above the measurements and the figures it draws on; the command line only parses, calls
one of these and prints. Which functions a run gets is chosen by its task's name
(:mod:`~induction_probes.probes.report.run_views`). This module imports nothing, so the command line can name
the views while it builds its options."""
