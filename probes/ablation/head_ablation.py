"""Head ablations through ``blocks.{l}.attn.hook_z``: does in-context learning depend on a head?

Three ways to remove a head's output z (``[batch, pos, head, d_head]``), from crudest to gentlest:

- ``zero``: z = 0. Simple, but pushes the residual stream somewhere it never is in training.
- ``mean``: z = its mean over the sequences and positions of a reference set. Keeps the average
  contribution, removes the information.
- ``resample``: z = the head's output on another sequence of the reference set, at the same position.
  Keeps the distribution of z, breaks its link to this sequence; usually the most faithful.

Mean and resample ablation need a reference set: other sequences of the same task. Pass one, or pass
``task=run.task`` and :func:`reference_inputs_for` draws REFERENCE_SEQS of its sequences with REFERENCE_SEED
(the command line's probe seed + 1, so apart from the run's training, evaluation and probe sequences); call
it yourself for another seed or size.

Hooks are attached only inside a context manager, so nothing stays attached after an exception.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Shaped
from torch import Tensor

from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.validation import quoted
from induction_probes.probes.attention.patterns import run_with_captures

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.tasks.task_config import Task

MODES = ("zero", "mean", "resample")
# a head as the command line writes it (1.0) or as TransformerLens names it (L1H0)
HEAD_NAME = re.compile(r"([0-9]+)\.([0-9]+)|L([0-9]+)H([0-9]+)")
REFERENCE_SEQS, REFERENCE_SEED = 1000, 12346


def reference_inputs_for(
    task: Task, n_seqs: int = REFERENCE_SEQS, seed: int = REFERENCE_SEED
) -> Shaped[Tensor, "batch ..."]:
    """The default reference set of mean and resample ablation: ``n_seqs`` fresh sequences of ``task``
    (a run's ``run.task``) drawn with ``seed``, the same for the same seed."""
    return task.eval_set(n_seqs, seed).inputs


def parse_heads(text: str, n_layers: int, heads_per_layer) -> list[tuple[int, int]]:
    """'0.0,1.0' → [(0, 0), (1, 0)], checked against the model's shape."""
    heads = parse_head_list(text)
    check_heads(heads, n_layers, heads_per_layer)
    return heads


def parse_head_list(text: str) -> list[tuple[int, int]]:
    """'0.0,1.0' (or TransformerLens's 'L0H0,L1H0') → [(0, 0), (1, 0)], before the model's shape is known."""
    heads = []
    for item in text.split(","):
        match = HEAD_NAME.fullmatch(item.strip())
        if match is None or max(len(group or "") for group in match.groups()) > 6:  # no model has 10^6 layers
            raise BadInput(f"heads must look like L.H,L.H (e.g. 0.0,1.0) or L0H0,L1H0, got {quoted(text)}")
        heads.append((int(match.group(1) or match.group(3)), int(match.group(2) or match.group(4))))
    if twice := sorted({head for head in heads if heads.count(head) > 1}):
        raise BadInput(f"{', '.join(f'L{layer}H{head}' for layer, head in twice)} named twice: name each head once")
    return heads


def heads_in_layer(cfg, layer: int) -> int:
    """Heads of a layer: our config knows per-layer counts, a TransformerLens config has n_heads."""
    return cfg.heads(layer) if hasattr(cfg, "heads") else cfg.n_heads


def single_heads(model: HookedModel) -> list[list[tuple[int, int]]]:
    """Every head of ``model`` alone, as head sets for an ablation study (our models and any hooked model)."""
    cfg = model.cfg
    return [[(layer, head)] for layer in range(cfg.n_layers) for head in range(heads_in_layer(cfg, layer))]


def check_heads(heads: list[tuple[int, int]], n_layers: int, heads_per_layer) -> None:
    if not heads:
        raise BadInput("no heads to ablate")
    for item in heads:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(is_index(v) for v in item)):
            raise BadInput(f"a head is a pair of integers (layer, head), got {str(item)[:200]}")
        layer, head = item
        if not 0 <= layer < n_layers:
            raise BadInput(f"layer {layer} (in head {layer}.{head}) is out of range: the model has {n_layers} layers")
        if not 0 <= head < heads_per_layer(layer):
            raise BadInput(f"head {layer}.{head} is out of range: layer {layer} has {heads_per_layer(layer)} head(s)")


def is_index(value) -> bool:
    """An integer index (a bool is an int to Python, never a layer or a head here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def z_hook(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def reference_z(model: HookedModel, reference_inputs: Tensor, layers: set[int]) -> dict[int, Tensor]:
    """hook_z of the clean model on the reference set, for the given layers."""
    _, captured = run_with_captures(model, reference_inputs, [z_hook(layer) for layer in sorted(layers)], output=False)
    return {layer: captured[z_hook(layer)] for layer in layers}


def replacement(
    mode: str, z: Tensor, reference: Tensor | None, heads: list[int], generator: torch.Generator
) -> Float[Tensor, "batch pos head d_head"]:
    """What the ablated heads' z becomes, [batch, pos, len(heads), d_head]."""
    if mode == "zero":
        return torch.zeros_like(z[:, :, heads])
    if reference is None:
        raise BadInput(f"{mode} ablation needs reference sequences")
    if mode == "mean":
        return reference[:, :, heads].mean(dim=(0, 1)).expand_as(z[:, :, heads])
    n_ref = reference.shape[0]
    if z.shape[1] > reference.shape[1]:
        raise BadInput("resample ablation needs reference sequences at least as long as the inputs")
    picks = torch.randint(0, n_ref, (z.shape[0],), generator=generator)
    return reference[picks][:, : z.shape[1], heads]


def run_ablated(
    model: HookedModel,
    inputs: Tensor,
    heads: list[tuple[int, int]],
    mode: str = "zero",
    reference_inputs: Tensor | None = None,
    seed: int = 0,
    task=None,
) -> Float[Tensor, "batch pos d_out"]:
    """The model's output on ``inputs`` with ``heads`` ablated together.

    ``reference_inputs`` (for mean and resample) should be other sequences from the same task; without
    them, ``task`` gives the default set (:func:`reference_inputs_for`). ``seed`` picks resample's sequences.
    """
    hooks = ablation_hooks(model, heads, mode, reference_inputs, seed, task)
    with torch.no_grad():
        return model.run_with_hooks(inputs.to(model_device(model)), fwd_hooks=hooks).cpu()


def ablation_hooks(
    model: HookedModel,
    heads: list[tuple[int, int]],
    mode: str = "zero",
    reference_inputs: Tensor | None = None,
    seed: int = 0,
    task=None,
) -> list[tuple[str, object]]:
    """The ``fwd_hooks`` that ablate ``heads`` together (:func:`run_ablated`'s arguments), for a pass that
    also captures activations (:func:`~induction_probes.probes.attention.patterns.run_with_captures`)."""
    if mode not in MODES:
        raise BadInput(f"unknown ablation mode {mode!r}: use zero, mean or resample")
    check_heads(heads, model.cfg.n_layers, lambda layer: heads_in_layer(model.cfg, layer))
    by_layer: dict[int, list[int]] = defaultdict(list)
    for layer, head in heads:
        by_layer[layer].append(head)
    references = {}
    if mode != "zero":
        if reference_inputs is None:
            if task is None:
                raise BadInput(
                    f"{mode} ablation needs reference inputs: pass reference_inputs, or task=run.task "
                    f"to draw {REFERENCE_SEQS} of its sequences (seed {REFERENCE_SEED})"
                )
            reference_inputs = reference_inputs_for(task)
        references = reference_z(model, reference_inputs, set(by_layer))
    generator = torch.Generator().manual_seed(seed)

    def ablate(layer: int):
        def hook(z: Tensor, hook) -> Tensor:
            z = z.clone()  # never write into a tensor that a cache or caller may hold
            heads = by_layer[layer]  # replaced on the CPU, where the references and the generator are
            z[:, :, heads] = replacement(mode, z.cpu(), references.get(layer), heads, generator).to(z.device)
            return z

        return hook

    return [(z_hook(layer), ablate(layer)) for layer in sorted(by_layer)]


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise BadInput(f"unknown ablation mode {str(mode)[:200]!r}: use zero, mean or resample")
