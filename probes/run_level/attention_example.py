"""One probe sequence's attention at a checkpoint of a run, for CircuitsVis's explorer
(:class:`~induction_probes.probes.views.explorer.AttentionExample`): what a run's probes show in a notebook and
what the formation movie shows at each step."""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.devices import Device
from induction_probes.circuits.names import head_label
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.probes.attention.patterns import run_with_patterns
from induction_probes.probes.behaviour.icl_behaviour import even_sequence
from induction_probes.probes.views.explorer import AttentionExample, rounded

EXAMPLE_POSITIONS = 30  # tokens shown: a causal model's first 30 patterns do not depend on what comes later


def example_sequence(run: Run, inputs: Tensor) -> tuple[Tensor, list[str]]:
    """The sequence (a batch of one) whose patterns are shown, and its tokens as text: an ICL-MC run's chain states
    on the probe sequence spread most evenly over them, a Gaussian-task run's positions x0, x1, ... (its tokens
    are vectors), another task's token ids; at most EXAMPLE_POSITIONS of them."""
    if isinstance(run.task, GaussianTask):
        example = inputs[:1, :EXAMPLE_POSITIONS]
        return example, [f"x{i}" for i in range(example.shape[1])]
    example = even_sequence(inputs, EXAMPLE_POSITIONS)[:EXAMPLE_POSITIONS]
    return example[None], [str(int(token)) for token in example]


def head_patterns(
    run: Run,
    step: int,
    example: Tensor,
    heads: list[tuple[int, int]] | None = None,
    device: Device = None,
) -> tuple[list[tuple[int, int]], list[Float[Tensor, "query_pos key_pos"]]]:
    """``heads`` (default every head, layer by layer) and each one's pattern on ``example`` at ``step``."""
    layers = run_with_patterns(run.load(step=step, device=device), example)[1]
    heads = heads or [(layer, head) for layer, pattern in enumerate(layers) for head in range(pattern.shape[1])]
    return heads, [layers[layer][0, head] for layer, head in heads]


def run_attention(run: Run, step: int, inputs: Tensor, device: Device = None) -> AttentionExample:
    """Every head's pattern at ``step`` on one of ``inputs`` (:func:`example_sequence`)."""
    example, tokens = example_sequence(run, inputs)
    heads, patterns = head_patterns(run, step, example, device=device)
    caption = f"run {run.path.name}, step {step}: every head's attention on one probe sequence"
    return AttentionExample(tokens, [head_label(*h) for h in heads], rounded(patterns), caption)
