"""``induction-probes paper``: every figure of Edelman et al. 2024 and Wang et al. that the project
reproduces, redrawn from the shipped runs and results, on one offline page that says for each figure and
claim what the paper claims, what we measured, and whether the two agree."""
