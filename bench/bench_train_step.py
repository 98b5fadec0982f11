"""The ICL-MC training step today against the one of version 0.2.0, in one process.

A step: draw a batch of 64 Dir(1) chains of T = 100 (k = 3), forward, cross-entropy at every position,
backward, AdamW; the default markov recipe (2 layers, one head each, relative positions, width 16,
LayerNorm). Version 0.2.0 computed the relative term q_i·r_{i−j} by a gather over distances, masked the
scores with ``masked_fill``, projected with einsums and walked the chains with a torch loop over
positions; today's code uses the skew form, an added −inf bias inside one ``baddbmm``, single matmuls
and a numpy lookup loop. Both are timed interleaved (old, new, new, old, ...) at one torch thread, as
the median over repeats of STEPS steps after warm-up. Checks first that both give the same batches and
logits (within 1e-6; they agree bit for bit). Target: new/old >= 1.4.

Run from the repository root: ``.venv/bin/python bench/bench_train_step.py``.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import Tensor

from induction_probes.circuits.models.model import Attention, softmax_over_allowed
from induction_probes.circuits.models.model_classes import build_model
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.draws import sample_categorical, sample_dirichlet
from induction_probes.circuits.tasks.markov import chains as markov_module
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask

STEPS, REPEATS, BATCH = 20, 7, 64


def v020_attention_forward(self: Attention, x: Tensor) -> Tensor:
    """Version 0.2.0's attention layer (the reference this bench measures against)."""
    n_pos = x.shape[1]

    def project(weight, bias_name):
        out = torch.einsum("bpd,hde->bphe", x, weight)
        return out + getattr(self, bias_name) if self.cfg.use_bias else out

    q, k, v = (
        self.hook_q(project(self.W_Q, "b_Q")),
        self.hook_k(project(self.W_K, "b_K")),
        self.hook_v(project(self.W_V, "b_V")),
    )
    q_scaled = q * self.scale
    scores = torch.einsum("bqhe,bkhe->bhqk", q_scaled, k)
    distance = self.distance[:n_pos, :n_pos]
    by_distance = torch.einsum("bqhe,hde->bhqd", q_scaled, self.W_rel[:, :n_pos])
    scores = scores + self.hook_pos_scores(by_distance.gather(-1, distance.expand(*by_distance.shape[:2], -1, -1)))
    allowed = self.allowed[:n_pos, :n_pos]
    scores = self.hook_attn_scores(scores.masked_fill(~allowed, -torch.inf))
    pattern = softmax_over_allowed(scores, allowed) if self.strict else torch.softmax(scores, dim=-1)
    z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", self.hook_pattern(pattern), v))
    return torch.einsum("bqhe,hed->bqd", z, self.W_O)


def v020_sample(n_seqs: int, k: int, seq_len: int, generator: torch.Generator) -> Tensor:
    """Version 0.2.0's sampler of bigram Dir(1) chains: the same draws, looked up by torch each position."""
    table = sample_dirichlet((n_seqs, k), k, 1.0, generator)
    pi = markov_module.stationary_distribution(table)
    uniforms = torch.rand(n_seqs, seq_len + 1, generator=generator, dtype=torch.float64)
    states = torch.empty(n_seqs, seq_len + 1, dtype=torch.long)
    states[:, 0] = sample_categorical(pi, uniforms[:, 0])
    rows = torch.arange(n_seqs)
    for t in range(1, seq_len + 1):
        states[:, t] = sample_categorical(table[rows, states[:, t - 1]], uniforms[:, t])
    return states


class Step:
    """One training setup; ``old`` switches to version 0.2.0's attention and sampler."""

    def __init__(self, old: bool):
        self.recipe = MarkovRecipe(task=MarkovTask(k=3))
        self.model = build_model(self.recipe.model_config())
        self.optimizer, _ = self.recipe.make_optimizer(self.model)
        self.old = old
        self.stream = self.recipe.task.stream(seed=1)
        self.generator = torch.Generator().manual_seed(1)

    def batch(self) -> Tensor:
        if self.old:
            return v020_sample(BATCH, 3, 100, self.generator)
        return self.stream.take(BATCH).states

    def forward(self, inputs: Tensor) -> Tensor:
        Attention.forward = v020_attention_forward if self.old else NEW_FORWARD
        return self.model(inputs)

    def __call__(self) -> None:
        states = self.batch()
        logits = self.forward(states[:, :-1])
        loss = self.recipe.task.loss(logits, states[:, 1:])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()


NEW_FORWARD = Attention.forward


def check_same_maths() -> None:
    old, new = Step(old=True), Step(old=False)
    batch_old, batch_new = old.batch(), new.batch()
    assert torch.equal(batch_old, batch_new), "the two samplers drew different sequences"
    with torch.no_grad():
        difference = (old.forward(batch_old[:, :-1]) - new.forward(batch_new[:, :-1])).abs().max().item()
    assert difference <= 1e-6, difference
    print(f"same batches; logits differ by at most {difference:.1e}")


def seconds_per_step(step: Step) -> float:
    start = time.perf_counter()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - start) / STEPS


def main() -> None:
    torch.set_num_threads(1)
    check_same_maths()
    steps = {"0.2.0": Step(old=True), "today": Step(old=False)}
    for step in steps.values():
        for _ in range(5):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(REPEATS):
        order = list(steps) if repeat % 2 == 0 else list(reversed(steps))
        for name in order:
            times[name].append(seconds_per_step(steps[name]))
    old, new = statistics.median(times["0.2.0"]), statistics.median(times["today"])
    print(f"{'training step (1 thread)':28s} {'0.2.0 ms':>9s} {'today ms':>9s} {'speed-up':>9s}")
    print(f"{'batch 64, T = 100, k = 3':28s} {old * 1e3:9.2f} {new * 1e3:9.2f} {old / new:8.2f}x   (target >= 1.40x)")
    Attention.forward = NEW_FORWARD


if __name__ == "__main__":
    main()
