"""Worker processes: what a worker may import and how it starts and dies (:mod:`.worker_start`), and the Ray
session that sweeps and language-model series run their tasks in (:mod:`.ray_session`)."""
