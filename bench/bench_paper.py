"""How long ``induction-probes paper`` takes to redraw both papers from the shipped files, beside the cost of
starting the command at all (importing torch and the figures). Target (issue 23): <= 120 s wall here.
Wall time and the CPU time of the command are printed; on a loaded machine the CPU time is the steadier one."""

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = str(Path(sys.executable).with_name("induction-probes"))
TARGET_S = 120
START_ONLY = [sys.executable, "-c", "import torch, induction_probes.probes.paper.build"]


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of ``argv``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    start_wall, start_cpu = timed(START_ONLY)
    with tempfile.TemporaryDirectory() as scratch:
        wall, cpu = timed([COMMAND, "paper", "--out", str(Path(scratch) / "page")])
    print(f"{'what':44s} {'wall s':>8s} {'CPU s':>8s}")
    print(f"{'start only (import torch and the page code)':44s} {start_wall:8.1f} {start_cpu:8.1f}")
    print(f"{'induction-probes paper --out DIR':44s} {wall:8.1f} {cpu:8.1f}")
    print(f"paper: {wall / TARGET_S:.2f} of the {TARGET_S} s target; {wall / start_wall:.0f}x starting the command")


if __name__ == "__main__":
    main()
