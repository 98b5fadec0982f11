"""The summaries of a sweep (:mod:`.summary`) and the statistics that compare its conditions
(:mod:`.statistics`, :mod:`.sweep_statistics`)."""
