"""A trained ICL-MC run against Edelman et al.'s Proposition 2.1, in gauge-invariant terms: attention
on the same sequences, layer 0's positional profile, layer 1's token matching and its OV circuit.
(The construction against its own limit: :mod:`induction_probes.probes.comparison.construction_limits`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.devices import on_cpu
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.attention_masks import causal_mask, previous_tokens
from induction_probes.circuits.models.model_config import dtype_name
from induction_probes.probes.attention.patterns import positional_profiles, run_with_captures, run_with_patterns
from induction_probes.probes.progress.crossing_caveats import coarse_warnings, initial_model_of, progress_warnings
from induction_probes.probes.progress.logit_space import shift_free, through_final_norm
from induction_probes.probes.progress.progress_measures import (
    config_calibration,
    progress_measures,
    unmeasurable_reason,
)
from induction_probes.probes.tidy import Tidy, comparison_records

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import WeightedModel
    from induction_probes.circuits.models.model import HookedTransformer


@dataclass(frozen=True)
class Prop21Comparison(Tidy):
    """How close a trained ICL-MC model is to Proposition 2.1, in gauge-invariant terms. ``failures`` lists the
    construction's signatures the model lacks, in words, and ``matches`` is true when there are none."""

    attention_tv: list[float]  # per layer: mean over queries of TV(trained row, construction row)
    positional_profile: Tensor  # trained layer 0, [distance]
    positional_profile_tv: float  # TV to the construction's (≈ one-hot at distance 1)
    token_matching: Tensor  # [k, k]: mean layer-1 content score, query token a vs key's previous token b
    token_matching_analytic: Tensor
    diagonal_is_row_max: float  # share of rows a whose largest entry is (a, a)
    ov_circuit: Tensor  # [k, k]: token a's value through layer 1's OV to the logits of b
    ov_circuit_analytic: Tensor
    ov_top1_diagonal: float
    ov_eigenvalues: Tensor  # on the k − 1 directions that change a softmax (logit shifts dropped)
    below_threshold: dict[str, tuple[float, float]]  # progress measures short of halfway: name → (value, threshold)
    warnings: list[str] = field(default_factory=list)  # measures whose verdict means little (probes.caveats)
    # the construction's signatures the model lacks, in words (signature_failures): derived from the fields
    # above when the result is made, so that it is read as data, like them
    failures: list[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "failures", signature_failures(self))  # frozen: set once, here

    def to_json(self) -> dict[str, Any]:
        return {
            "attention_tv": self.attention_tv,
            "positional_profile_peak": int(self.positional_profile.argmax()),
            "positional_profile_at_1": self.positional_profile[1].item(),
            "positional_profile_tv": self.positional_profile_tv,
            "token_matching": self.token_matching.tolist(),
            "diagonal_is_row_max": self.diagonal_is_row_max,
            "ov_circuit": self.ov_circuit.tolist(),
            "ov_top1_diagonal": self.ov_top1_diagonal,
            "ov_eigenvalues_real": self.ov_eigenvalues.real.tolist(),
            "ov_eigenvalues_positive": bool((self.ov_eigenvalues.real > 0).all()),
            "progress_below_threshold": {name: list(pair) for name, pair in self.below_threshold.items()},
            "warnings": self.warnings,
        }

    def to_records(self, sequences_seen: int | None = None, step: int | None = None) -> list[dict[str, Any]]:
        return comparison_records(self, step, sequences_seen)

    @property
    def matches(self) -> bool:
        """Whether the model has every signature of the construction: the verdict ``verify prop21 --against``
        prints ("matches the construction's signatures", else "differs: " and the failures)."""
        return not self.failures


def signature_failures(result: Prop21Comparison) -> list[str]:
    """Which of the construction's signatures a comparison finds the trained model lacking, in words."""
    problems = []
    peak = int(result.positional_profile.argmax())
    if peak != 1:
        problems.append(f"layer 0's positional profile peaks at distance {peak}, not 1")
    if result.diagonal_is_row_max < 1.0:
        problems.append(
            f"layer 1's token matching is diagonal-dominant in only {result.diagonal_is_row_max:.0%} of rows"
        )
    if result.ov_top1_diagonal < 1.0:
        problems.append(f"layer 1's OV circuit copies only {result.ov_top1_diagonal:.0%} of tokens")
    if not (result.ov_eigenvalues.real > 0).all():
        problems.append("layer 1's OV circuit has a non-positive eigenvalue")
    # an argmax is passed by a nearly flat pattern too: each piece must also be halfway from chance
    problems += [
        f"{name.replace('_', ' ')} is {value:.3f}, short of its threshold {threshold:.3f}"
        for name, (value, threshold) in result.below_threshold.items()
    ]
    return problems


def token_matching_matrix(model: WeightedModel, tokens: Tensor, k: int) -> Float[Tensor, "k k"]:
    """Mean content score q_i·k_j/√d_head of layer 1 over the pairs j ≤ i with x_i = a and x_{j−1} = b.

    Measured on the model's own activations, so LayerNorm, the layer-0 output and any basis change
    are all accounted for: the effective matrix through the layer-0 OV circuit, whatever the gauge.
    """
    names = ["blocks.1.attn.hook_q", "blocks.1.attn.hook_k"]
    _, captured = run_with_captures(model, tokens, names, output=False)
    q, key = captured[names[0]][:, :, 0], captured[names[1]][:, :, 0]
    scores = torch.einsum("bqe,bke->bqk", q, key) / q.shape[-1] ** 0.5
    previous, causal = previous_tokens(tokens), causal_mask(tokens.shape[1])
    matrix = torch.zeros(k, k, dtype=torch.float64)
    for a in range(k):
        for b in range(k):
            pairs = (tokens[:, :, None] == a) & (previous[:, None, :] == b) & causal
            matrix[a, b] = scores[pairs].double().mean()
    return matrix


def ov_circuit(model: WeightedModel) -> Float[Tensor, "k k"]:
    """W_E (through layer 1's LayerNorm, if any) W_V W_O (through the final LayerNorm's centring and
    gain, if any) W_U for layer 1's head: what attending to token a adds to the logit of b. The
    LayerNorms' positive scale factors are left out; they change no sign and no argmax."""
    embed = model.W_E.detach().double()
    block = model.blocks[1]
    if hasattr(block.ln1, "w"):
        embed = torch.nn.functional.layer_norm(embed, embed.shape[-1:], block.ln1.w.double(), block.ln1.b.double())
    out = embed @ block.attn.W_V[0].double() @ block.attn.W_O[0].double()
    return (through_final_norm(model, out) @ model.W_U.double()).detach()


def compare_with_prop21(model: HookedTransformer, tokens: Tensor, k: int, c: float = 100.0) -> Prop21Comparison:
    """Trained ``model`` against Proposition 2.1 at scale ``c`` on the same ``tokens``, in the model's dtype (by
    name, as prop21 takes it). A HookedTransformer: the caveats rebuild it at initialisation from its config."""
    analytic = load_construction(*prop21(k, c, model.cfg.n_ctx, dtype_name(model.cfg.torch_dtype)))
    _, trained_patterns = run_with_patterns(model, tokens)
    _, analytic_patterns = run_with_patterns(analytic, tokens)
    if not all(torch.isfinite(pattern).all() for pattern in analytic_patterns):
        raise BadInput(
            f"c = {c:g} is too large to compute in {model.cfg.dtype}: the construction's attention "
            "scores (~c^2) overflow"
        )
    attention_tv = [
        (0.5 * (t[:, 0] - a[:, 0]).abs().sum(-1)).mean().item() for t, a in zip(trained_patterns, analytic_patterns)
    ]
    profile = positional_profiles(model, tokens, 0)[0]
    analytic_profile = positional_profiles(analytic, tokens, 0)[0]
    matching = token_matching_matrix(model, tokens, k)
    weights = on_cpu(model)  # what reads the weights alone reads them on the CPU
    ov, ov_analytic = ov_circuit(weights), ov_circuit(analytic)
    return Prop21Comparison(
        attention_tv=attention_tv,
        positional_profile=profile,
        positional_profile_tv=0.5 * (profile - analytic_profile).abs().sum().item(),
        token_matching=matching,
        token_matching_analytic=token_matching_matrix(analytic, tokens, k),
        diagonal_is_row_max=(matching.argmax(-1) == torch.arange(k)).double().mean().item(),
        ov_circuit=ov,
        ov_circuit_analytic=ov_analytic,
        ov_top1_diagonal=(ov.argmax(-1) == torch.arange(k)).double().mean().item(),
        ov_eigenvalues=torch.linalg.eigvals(shift_free(ov)),
        below_threshold=progress_below_threshold(weights),
        warnings=comparison_warnings(weights, k),
    )


def comparison_warnings(model: HookedTransformer, k: int) -> list[str]:
    """Caveats of the comparison (:mod:`induction_probes.probes.progress.crossing_caveats`): progress measures at or
    past their
    threshold at initialisation, and the measures that count tokens out of k."""
    counted = coarse_warnings(k, ("diagonal_is_row_max", "ov_top1_diagonal"))
    return progress_warnings(model, initial_model_of(model)) + counted


def progress_below_threshold(model: WeightedModel) -> dict[str, tuple[float, float]]:
    """The calibrated progress measures (:mod:`induction_probes.probes.progress.progress_measures`) that ``model`` has
    not brought halfway
    from chance to the construction; none where they do not apply."""
    if unmeasurable_reason(model):
        return {}
    measures = progress_measures(model)
    values = {name: (measures.value(name), m.threshold) for name, m in config_calibration(model.cfg).items()}
    return {name: (value, threshold) for name, (value, threshold) in values.items() if value < threshold}
