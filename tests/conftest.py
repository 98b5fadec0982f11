import torch

# The CLI's default, measured in bench/bench_model.py: one thread is faster for these tiny models on
# the 2-core machine, and two threads contend badly whenever anything else runs.
torch.set_num_threads(1)
