"""Ours against the peer a researcher would pick: TransformerLens 4.3's ``TransformerBridge``.

The closest model the bridge expresses: two attention-only layers of one head, width 16, context 100,
vocabulary 3, pre-LayerNorm, absolute (learned) positions, booted offline with ``boot_native`` (its own
architecture; ``boot_transformers`` resolves a model name on the Hugging Face hub) and holding our
weights through TransformerLens's own converter (``circuits/interop/transformer_lens_io.py``). Timed, interleaved
in rounds (ours, the bridge, ours with relative positions, ...), as medians over rounds:

- a training step (ours also with a hook on the pattern, which keeps the eager maths): forward,
  cross-entropy at every position, backward, AdamW, on a batch of 64 ICL-MC sequences (k = 3, T = 100),
  drawn before timing;
- a probe over a checkpoint series: for each of CHECKPOINTS weight sets, load them into the model and
  compute every layer's previous-token score from its attention patterns on 200 sequences (hooks).

One torch thread, as the command line uses; on every device this machine has (cpu, and cuda if present).
Target: ours >= 1.5x the bridge's training step on CPU.

    .venv/bin/python bench/bench_peer.py
"""

from __future__ import annotations

import contextlib
import io
import statistics
import time

import torch

from induction_probes.circuits.devices import visible_gpus
from induction_probes.circuits.interop.transformer_lens_io import to_bridge
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.attention.patterns import previous_token_scores, run_with_patterns

ROUNDS, STEPS, CHECKPOINTS, BATCH, PROBE_SEQS = 5, 10, 8, 64, 200


def our_model(positional: str, device: str) -> HookedTransformer:
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, n_ctx=100, d_vocab=3, positional=positional, normalization="LN"
    )
    return HookedTransformer(cfg).to(device)


def step_timer(model, tokens: torch.Tensor):
    """Seconds per training step of ``model`` on ``tokens`` (STEPS steps, after one warm-up step)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def step() -> None:
        logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def timed() -> float:
        model.train()
        step()
        synchronize(tokens.device)
        start = time.perf_counter()
        for _ in range(STEPS):
            step()
        synchronize(tokens.device)
        return (time.perf_counter() - start) / STEPS

    return timed


def probe_timer(make_model, series: list[dict], tokens: torch.Tensor):
    """Seconds to probe every checkpoint of ``series``: build the model holding its weights, then the
    previous-token scores from its patterns on ``tokens``."""

    def timed() -> float:
        start = time.perf_counter()
        for weights in series:
            model = make_model(weights)
            _, patterns = run_with_patterns(model, tokens)
            previous_token_scores(patterns)
        return time.perf_counter() - start

    return timed


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def checkpoint_series(model: HookedTransformer) -> list[dict]:
    """CHECKPOINTS weight sets: the model's, moved a little further each time (as training would)."""
    generator = torch.Generator().manual_seed(1)
    series, state = [], {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
    for _ in range(CHECKPOINTS):
        state = {
            name: t + 0.01 * torch.randn(t.shape, generator=generator) if t.is_floating_point() else t
            for name, t in state.items()
        }
        series.append(state)
    return series


def bench(device: str) -> None:
    task = MarkovTask(k=3, seq_len=100)
    batch = task.stream(0).take(BATCH)
    tokens = batch.states.to(device)  # [batch, T + 1]: inputs and targets
    absolute, relative = our_model("standard", device), our_model("relative", device)
    eager = our_model("standard", device)
    for block in eager.blocks:  # a hook on the pattern keeps the eager maths: the fused path's own reference
        block.attn.hook_pattern.add_hook(lambda pattern, hook: None)
    with contextlib.redirect_stdout(io.StringIO()):
        bridge = to_bridge(absolute).to(device)
    probe_tokens = task.stream(1).take(PROBE_SEQS).inputs
    series = checkpoint_series(absolute)

    def ours(weights):
        model = our_model("standard", device)
        model.load_state_dict(weights)
        return model.eval()

    def peer(weights):
        with contextlib.redirect_stdout(io.StringIO()):  # the bridge says where it moves, each time
            return to_bridge(ours(weights).cpu()).to(device)

    timers = {
        "step: ours, absolute positions": step_timer(absolute, tokens),
        "step: TransformerBridge": step_timer(bridge, tokens),
        "step: ours, absolute, eager maths (a hook on)": step_timer(eager, tokens),
        "step: ours, relative positions (default)": step_timer(relative, tokens),
        f"probe of {CHECKPOINTS} checkpoints: ours": probe_timer(ours, series, probe_tokens),
        f"probe of {CHECKPOINTS} checkpoints: TransformerBridge": probe_timer(peer, series, probe_tokens),
    }
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(ROUNDS):
        for name, timer in timers.items():
            times[name].append(timer())
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"device {device}: medians of {ROUNDS} interleaved rounds (range in brackets), one torch thread")
    for name, values in times.items():
        unit, scale = ("ms/step", 1e3) if name.startswith("step") else ("s", 1.0)
        print(f"  {name:<48} {median[name] * scale:8.2f} {unit} [{min(values) * scale:.2f}-{max(values) * scale:.2f}]")
    names = list(timers)
    print(f"  bridge / ours (absolute), training step: {median[names[1]] / median[names[0]]:.2f}x")
    print(f"  bridge / ours (relative), training step: {median[names[1]] / median[names[3]]:.2f}x")
    print(f"  ours eager / ours fused, training step:  {median[names[2]] / median[names[0]]:.2f}x")
    print(f"  bridge / ours, probe over checkpoints:   {median[names[5]] / median[names[4]]:.2f}x")


def main() -> None:
    torch.set_num_threads(1)
    for device in ["cpu"] + [f"cuda:{index}" for index in range(visible_gpus())]:
        bench(device)


if __name__ == "__main__":
    main()
