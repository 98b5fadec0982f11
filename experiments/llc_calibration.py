"""The learning coefficient estimator at its defaults on every calibration model (``CASES`` of
``probes/llc/calibration.py``: the five the rule was set on and the ones beyond them), as JSON on stdout: each
case's truth, estimate, spread over chains, problems, flags and seconds. docs/learning-coefficient.md's table is
read from its output, ``experiments/results/llc-calibration/cases.json``.

    python experiments/llc_calibration.py > experiments/results/llc-calibration/cases.json
"""

from __future__ import annotations

import json
import time

import torch

from induction_probes.probes.llc.calibration import CASES, calibrate


def main() -> None:
    torch.set_num_threads(1)
    start, cases = time.perf_counter(), []
    for name in CASES:
        began = time.perf_counter()
        cases.append(calibrate([name])[0] | {"seconds": round(time.perf_counter() - began, 1)})
    print(json.dumps({"settings": {}, "cases": cases, "seconds": round(time.perf_counter() - start, 1)}, indent=2))


if __name__ == "__main__":
    main()
