"""The summaries of a sweep (:mod:`.summary`) and the statistics that compare its conditions
(:mod:`.condition_tests`, :mod:`.summary_statistics`)."""
