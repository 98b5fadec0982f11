"""Run directories: their layout and file names (:mod:`.layout`), the writer (:mod:`.writer`), the reader
(:class:`~induction_probes.circuits.runs.reader.Run`) and the shipped runs (:mod:`.shipped`). No pickle anywhere."""
