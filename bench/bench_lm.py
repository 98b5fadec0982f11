"""``probe``, ``ablate`` and ``info`` on a language model of the size researchers study, against the hand-written
Hugging Face loop of ``lm_reference.py`` on the same sequences, in one run: wall time (start to exit, imports and
loading included, as a user waits) and peak memory of each process, and their ratios.

The model: GPT-2 small's shape (12 layers, 12 heads, d_model 768, 124 M parameters), random weights written with
``save_pretrained``; with ``--families gpt2,neox,llama`` also GPT-NeoX (Pythia's layout) and Llama with
grouped-query attention at the same width and depth, each probed. Targets (issue 62): probe at most 1.2x the loop,
zero ablation of every head at most 0.6x the hook loop, ``info`` under 3 s. Both sides run at torch's default
threads (the tool by its thread policy, circuits/threads.py), and each pair runs twice, interleaved, the faster
run of each side counting.

    .venv/bin/python bench/bench_lm.py [--families gpt2] [--n-seqs 16] [--length 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
COMMAND = str(Path(sys.executable).with_name("induction-probes"))
TARGETS = {"probe": 1.2, "ablate every head": 0.6}
REPEATS = 2  # each side runs this often, interleaved with the other; the fastest run counts
INFO_TARGET_S = 3.0
SEED = 12345


# --- run in a process of their own (``--prepare``): the driver stays small, since a child forked from it counts
# the driver's memory in its own peak until it execs


def gpt2_small_shaped(family: str):
    """A config of GPT-2 small's size in ``family``'s layout (Llama: 4 key-value heads for 12 query heads)."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    size = {"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "vocab_size": 50257}
    if family == "gpt2":
        return GPT2Config()
    if family == "neox":
        return GPTNeoXConfig(**size, intermediate_size=3072, max_position_embeddings=1024, rotary_pct=0.25)
    return LlamaConfig(**size, num_key_value_heads=4, intermediate_size=2048, max_position_embeddings=1024)


def save_model(family: str, folder: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(gpt2_small_shaped(family), attn_implementation="eager").save_pretrained(folder)
    return folder


def save_tokens(folder: Path, n_seqs: int, length: int, seed: int, path: Path) -> None:
    """The project's protocol's sequences for this model, for the reference to read."""
    from safetensors.torch import save_file

    from induction_probes import lm

    bridge = lm.as_hooked(str(folder))
    repeated = lm.repeated_random_tokens(bridge, length, n_seqs, seed)
    save_file({"tokens": repeated.tokens, "control": repeated.control, "lengths": repeated.lengths}, str(path))


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak resident memory (GiB) and stdout of one process (its own rusage, from wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0), err.seek(0)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().decode()[-2000:]}")
        return seconds, usage.ru_maxrss / 2**20, out.read().decode()


def fastest_pair(ours: list[str], reference: list[str]) -> tuple[tuple, tuple]:
    """Each side's fastest of REPEATS runs, interleaved (ours, the reference, ours, ...), so that a slow spell of
    the machine falls on both."""
    runs = [(timed(ours), timed(reference)) for _ in range(REPEATS)]
    return min((run[0] for run in runs), key=lambda r: r[0]), min((run[1] for run in runs), key=lambda r: r[0])


def compare(name: str, ours: tuple, reference: tuple, target: float | None) -> str:
    ratio = ours[0] / reference[0]
    verdict = "" if target is None else (" PASS" if ratio <= target else " MISS") + f" (target <= {target}x)"
    return (
        f"{name:34s} {ours[0]:8.1f} s {ours[1]:6.2f} GiB | {reference[0]:8.1f} s {reference[1]:6.2f} GiB | "
        f"{ratio:5.2f}x{verdict}"
    )


def prepare(family: str, root: Path, options: argparse.Namespace) -> None:
    """The model and the sequences both sides read (``--prepare``, in its own process)."""
    folder = save_model(family, root / family)
    save_tokens(folder, options.n_seqs, options.length, SEED, root / f"{family}-probe.safetensors")
    if family in options.ablate:
        save_tokens(folder, options.ablate_seqs, options.ablate_length, SEED, root / f"{family}-ablate.safetensors")


def bench_family(family: str, root: Path, options: argparse.Namespace, argv: list[str]) -> Iterator[str]:
    """The table's lines for one family, each as soon as it is measured."""
    timed([sys.executable, __file__, *argv, "--prepare", family, "--root", str(root)])
    folder, seed = root / family, SEED
    probe_tokens, ablate_tokens = root / f"{family}-probe.safetensors", root / f"{family}-ablate.safetensors"
    protocol = ["--length", str(options.length), "--seed", str(seed), "--quiet", "--json"]
    ours, reference = fastest_pair(
        [COMMAND, "probe", str(folder), "--n-seqs", str(options.n_seqs), *protocol],
        [sys.executable, str(HERE / "lm_reference.py"), "probe", str(folder), str(probe_tokens)],
    )
    check_probe(json.loads(ours[2]), json.loads(reference[2]))
    yield compare(f"{family}: probe", ours, reference, TARGETS["probe"])
    info = timed([COMMAND, "info", str(folder)])
    yield f"{family + ': info':34s} {info[0]:8.1f} s {info[1]:6.2f} GiB | target < {INFO_TARGET_S} s"
    if family in options.ablate:
        protocol = ["--length", str(options.ablate_length), "--seed", str(seed), "--quiet", "--json"]
        ours, reference = fastest_pair(
            [COMMAND, "ablate", str(folder), "--n-seqs", str(options.ablate_seqs), *protocol],
            [sys.executable, str(HERE / "lm_reference.py"), "ablate", str(folder), str(ablate_tokens)],
        )
        check_ablation(json.loads(ours[2]), json.loads(reference[2]))
        yield compare(f"{family}: ablate every head", ours, reference, TARGETS["ablate every head"])


def check_probe(ours: dict, reference: dict) -> None:
    """Both sides measured the same sequences: every head's induction score agrees (float32, ~1e-6)."""
    for head in ours["heads"]:
        expected = reference["induction"][head["layer"]][head["index"]]
        if abs(head["induction"]["value"] - expected) > 1e-4:
            raise SystemExit(f"{head['head']}: induction {head['induction']['value']} against the loop's {expected}")


def check_ablation(ours: dict, reference: dict) -> None:
    for ablation in ours["ablations"]:
        (name,) = ablation["heads"]
        if abs(ablation["loss_increase"]["value"] - reference["rise"][name]) > 1e-3:
            raise SystemExit(f"{name}: rise {ablation['loss_increase']['value']} against {reference['rise'][name]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="gpt2", help="comma-separated: gpt2, neox, llama")
    parser.add_argument("--ablate", default="gpt2", help="families whose every head is ablated (minutes each)")
    parser.add_argument("--n-seqs", type=int, default=64)
    parser.add_argument("--length", type=int, default=30)
    parser.add_argument("--ablate-seqs", type=int, default=16)
    parser.add_argument("--ablate-length", type=int, default=30)
    parser.add_argument("--prepare", help=argparse.SUPPRESS)  # the child that writes a family's model and tokens
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.prepare:
        return prepare(options.prepare, options.root, options)
    print(
        f"GPT-2-small-shaped models (12 layers x 12 heads, d_model 768); probe: {options.n_seqs} sequences, "
        f"|R| {options.length}; ablate: {options.ablate_seqs} sequences, |R| {options.ablate_length}; "
        f"torch's default threads ({os.cpu_count()} CPUs here)"
    )
    print(f"{'':34s} {'induction-probes':>19s} | {'hand-written loop':>19s} | ratio")
    with tempfile.TemporaryDirectory() as root:
        for family in options.families.split(","):
            for line in bench_family(family, Path(root), options, sys.argv[1:]):
                print(line, flush=True)


if __name__ == "__main__":
    main()
