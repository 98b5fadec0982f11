"""The questions asked of a whole run: every probe on one checkpoint (:mod:`.checkpoint_probes`) and on each
checkpoint of a run (:mod:`.all_probes`), a run's probes as
one result (:mod:`.run_probes`, :mod:`.task_probes` for a task from outside the package), and its phases,
transition and first crossings (:mod:`.research_questions`)."""
