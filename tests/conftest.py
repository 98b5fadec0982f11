import re
from pathlib import Path

import pytest
import torch

# The CLI's default, measured in bench/bench_model.py: one thread is faster for these tiny models on
# the 2-core machine, and two threads contend badly whenever anything else runs.
torch.set_num_threads(1)

# Tests that read files made on another machine (the shipped runs in checkpoints/, the shipped results in
# experiments/results/) must hold on any CPU: they compare within float32 rounding or check decisions with a
# stated margin. They carry the `shipped` mark so that tests/across_kernels.sh can run them under another
# CPU's kernels. A module is marked whole when its source names a shipped run or result.
SHIPPED = re.compile(r"markov-k[23]|minimal-k3|gaussian-ih2|experiments/results|\"results\"")


def pytest_collection_modifyitems(items):
    reads_shipped: dict[Path, bool] = {}
    for item in items:
        path = Path(item.fspath)
        if path not in reads_shipped:
            reads_shipped[path] = bool(SHIPPED.search(path.read_text()))
        if reads_shipped[path]:
            item.add_marker(pytest.mark.shipped)
