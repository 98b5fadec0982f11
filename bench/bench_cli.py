"""How fast the command line answers, beside starting Python with nothing to do and beside importing torch.
The command line imports only the module of the command given (its table of commands, issue 50): ``--help``, a
mistyped command and a language model's ``info`` load no torch (target: <= 0.3 s median); a command's own
``--help`` and its usage errors load the modules the command runs on (torch, TransformerLens), shown for scale."""

import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMAND = str(Path(sys.executable).with_name("induction-probes"))
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "induction-probes --help": [COMMAND, "--help"],
    "mistyped command (induction-probes trian)": [COMMAND, "trian"],
    "induction-probes train markov --help": [COMMAND, "train", "markov", "--help"],
    "induction-probes report --help": [COMMAND, "report", "--help"],
    "usage error (train markov --k three)": [COMMAND, "train", "markov", "--k", "three", "--out", "x"],
}


def median_seconds(argv: list[str], repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    baseline = median_seconds(CASES["python -c pass"])
    print(f"{'what':40s} {'median s':>9s} {'vs python':>10s}")
    for name, argv in CASES.items():
        seconds = median_seconds(argv)
        print(f"{name:40s} {seconds:9.3f} {seconds / baseline:9.1f}x")


if __name__ == "__main__":
    main()
