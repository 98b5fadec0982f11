"""The probe set's defaults, written once. Every command, view and summary that draws fresh sequences to probe
on takes these unless told otherwise, and the learning coefficient's command its own. Torch-free: the command
line's defaults read them while parsing."""

PROBE_SEED = 12345  # fresh sequences, a seed apart from every run's training and evaluation seeds
PROBE_SEQS = 1000  # `probe`, `ablate`, probe_model: enough for scores stable to the third decimal
# a language model's probes, command line and API alike: GPT-2 small reads 64 sequences of [BOS] + F + R + R in
# about half a minute per pass on one core, and its head scores' intervals are then a few hundredths wide
LM_PROBE_SEQS = 64
LM_CIRCUIT_SEQS = 32  # `circuit` on a language model: its sender outputs at GPT-2 small's size stay near 1 GB
CIRCUIT_SEQS = 400  # `circuit`: markov-k3's gap to ±10 %, and 137 checkpoints in under 10 minutes on one thread
PAGE_SEQS = 200  # the HTML report's and the paper page's probe set: stable scores in about a second per run
LLC_SEQS = 4096  # fresh sequences the LLC sampler draws its batches from
LLC_CHECKPOINTS = 12  # checkpoints `llc` estimates by default, spread evenly in log(sequences seen)
MOVIE_FRAMES = 24  # checkpoints a formation movie shows at most by default: about 1.6 MB for two heads
