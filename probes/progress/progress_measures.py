"""Progress measures of the two-layer ICL-MC circuit, read from the weights alone: which piece has formed.

Each measure isolates one piece by idealising the others (Bietti et al. 2023, §6 "memory recall"; the
composition and copying scores of Elhage et al. 2021 and Olsson et al. 2022):

- ``previous_token_match`` (layer-0 head): for query token a at position i, q_a = ln1⁰(W_E[a]) W_Q, and
  the softmax over the distances d = 0..i that position i can see of the relative term q_a·r_d/√d_head;
  the mass at d = 1, averaged over a and over i = 1..n_ctx−1. The content term is left out: this is the
  positional part of a previous-token head, the attention it pays to the previous token whatever the
  tokens are.
- ``k_composition_match`` (layer-1 head): with layer 0 idealised as a perfect previous-token layer, the
  residual entering layer 1 at a position holding x after y is r(x, y) = W_E[x] + Σ_h ln1⁰(W_E[y]) W_V⁰ W_O⁰
  (+ b_O⁰). The query of token a (mean over y) against the key made from layer 0's copy of token b
  (mean over the key's own token c): S[a, b] = q·k/√d_head; the softmax over b of S[a, :] at b = a,
  averaged over a: the attention a one-key-per-token context would pay to the key that follows a.
- ``ov_copying_accuracy`` (layer-1 head): attending to a position holding a (mean over its previous token)
  adds v(r(a, ·)) W_O¹ to the output; through the final LayerNorm's centring and gain and W_U, the share
  of tokens a whose largest logit is a (Bietti et al.'s argmax W_U W_O W_V e_a = a).
- ``ov_copying_score`` (layer-1 head): Σ Re λ / Σ |λ| over the eigenvalues of that k × k OV circuit, on
  the k − 1 directions that change a softmax (Olsson et al.'s copying score).
- ``composition`` Q, K and V (every layer-0 / layer-1 head pair): TransformerLens's
  ‖left·right‖_F / (‖left‖_F ‖right‖_F) with left the layer-0 OV and right the layer-1 QK (Q), QKᵀ (K)
  or OV (V).

LayerNorm is applied as the model applies it: each residual vector above is passed through the model's
own ``ln1`` (centring, scale, gain and bias), so these are the model's activations on idealised inputs.
Composition scores use matrices, so there ln1's centring and gain are folded into the weights it feeds;
its per-position scale is one positive number, which no Frobenius-norm ratio sees.

Every measure has a chance value (a model at initialisation) and a construction value (Edelman et al.'s
Proposition 2.1), both tested; its threshold is halfway between them, and a piece "has formed" from the
first checkpoint at which its measure reaches the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens import FactoredMatrix
from transformer_lens.utilities.matrix import composition_scores

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.model_config import HookedTransformerConfig
from induction_probes.probes.progress.logit_space import shift_free, through_final_norm
from induction_probes.probes.tidy import Tidy, progress_records

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel, WeightedModel

SCALAR_MEASURES = ("previous_token_match", "k_composition_match", "ov_copying_accuracy", "ov_copying_score")
COMPOSITION_MODES = ("Q", "K", "V")


@dataclass(frozen=True)
class Measure:
    """Where a measure sits by chance and on the construction, and the threshold halfway between."""

    name: str
    chance: float
    construction: float

    @property
    def threshold(self) -> float:
        return (self.chance + self.construction) / 2


def calibration(k: int, n_ctx: int, d_model: int) -> dict[str, Measure]:
    """Chance and construction values of the measures that have a threshold (Q and V composition do not:
    the construction does not use them, its value there is 0, the same as a model that ignores layer 0).

    Chance: a uniform softmax over the i + 1 keys of position i, averaged over i = 1..n_ctx−1; 1/k for a
    match or an argmax among k tokens; 0 for the copying score (eigenvalues of a random matrix are as often
    negative as positive); 1/√d_model for a composition score (independent random matrices: E‖AB‖² =
    ‖A‖²‖B‖²/d when B is rotation-invariant).
    Construction (Proposition 2.1 at c = 100): the measure's ideal value 1, except K composition:
    layer 0's OV maps the token block onto the previous-token block, layer 1's QKᵀ maps it back, both
    rank-k identities, so the score is ‖I_k‖/(‖I_k‖‖I_k‖) = 1/√k.
    """
    return {
        "previous_token_match": Measure(
            "previous_token_match", sum(1 / (i + 1) for i in range(1, n_ctx)) / (n_ctx - 1), 1.0
        ),
        "k_composition_match": Measure("k_composition_match", 1 / k, 1.0),
        "ov_copying_accuracy": Measure("ov_copying_accuracy", 1 / k, 1.0),
        "ov_copying_score": Measure("ov_copying_score", 0.0, 1.0),
        "composition_K": Measure("composition_K", 1 / d_model**0.5, 1 / k**0.5),
    }


@dataclass(frozen=True)
class ProgressMeasures(Tidy):
    """One checkpoint's measures: per layer-0 head, per layer-1 head, or [layer-0 head][layer-1 head]."""

    step: int
    previous_token_match: list[float]
    k_composition_match: list[float]
    ov_copying_accuracy: list[float]
    ov_copying_score: list[float]
    composition: dict[str, list[list[float]]]

    def to_json(self) -> dict[str, Any]:
        return (
            {"step": self.step}
            | {name: getattr(self, name) for name in SCALAR_MEASURES}
            | {"composition": self.composition}
        )

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]:
        return progress_records(self, sequences_seen)

    def value(self, name: str) -> float:
        """The best head's value of a measure (``composition_K``: the best pair): a piece forms if any head forms it."""
        if name.startswith("composition_"):
            return max(max(row) for row in self.composition[name.removeprefix("composition_")])
        return max(getattr(self, name))


def unmeasurable_reason(model: HookedModel) -> str | None:
    """Why the measures do not apply to ``model`` (None: they do)."""
    cfg = model.cfg
    if not isinstance(cfg, HookedTransformerConfig):  # the one config with per-layer positions
        return f"progress measures need the HookedTransformer, not {type(model).__name__}"
    if cfg.input_type != "tokens" or cfg.n_layers < 2:
        return "progress measures need a token model with at least two layers"
    if cfg.layer_positional(0) != "relative" or cfg.positional == "standard":
        return "progress measures need learned relative positions in layer 0 and no absolute positions"
    return None


def head_outputs(attn, normed: Tensor) -> Float[Tensor, "head row d_model"]:
    """[head, rows, d_model]: what each head writes when it attends wholly to positions with input ``normed``."""
    out = torch.einsum("xd,hde,hem->hxm", normed, attn.W_V, attn.W_O)
    if attn.cfg.use_bias:
        out = out + torch.einsum("he,hem->hm", attn.b_V, attn.W_O)[:, None]
    return out


def layer1_residuals(model: WeightedModel) -> Float[Tensor, "k k d_model"]:
    """[x, y, d_model]: the residual entering layer 1 at a position holding x after y, with every layer-0
    head attending wholly to the previous token."""
    W_E = model.W_E.detach()
    block0 = model.blocks[0]
    copied = head_outputs(block0.attn, block0.ln1(W_E)).sum(0)  # [y, d_model]
    if block0.attn.cfg.use_bias:
        copied = copied + block0.attn.b_O
    return W_E[:, None, :] + copied[None, :, :]


def project(block, residual: Tensor, weight: Tensor, bias: str) -> Float[Tensor, "head ... d_head"]:
    """[head, ..., d_head]: ln1 (as the model applies it) then one projection of every head."""
    out = torch.einsum("...d,hde->h...e", block.ln1(residual), weight)
    if block.attn.cfg.use_bias:
        out = out + getattr(block.attn, bias).reshape(out.shape[0], *[1] * (out.dim() - 2), -1)
    return out


def previous_token_match(model: WeightedModel) -> list[float]:
    block = model.blocks[0]
    q = project(block, model.W_E, block.attn.W_Q, "b_Q")  # [head, a, d_head]
    scores = torch.einsum("hae,hde->had", q, block.attn.W_rel) / model.cfg.d_head**0.5
    # position i sees distances 0..i: its normaliser is the running log-sum-exp up to d = i
    at_distance_1 = (scores[..., 1:2] - torch.logcumsumexp(scores, -1)[..., 1:]).exp()  # [head, a, i = 1..n−1]
    return at_distance_1.mean(dim=(1, 2)).tolist()


def k_composition_match(model: WeightedModel, residual: Tensor) -> list[float]:
    block = model.blocks[1]
    q = project(block, residual, block.attn.W_Q, "b_Q").mean(2)  # [head, a, d_head], mean over the previous token
    k = project(block, residual, block.attn.W_K, "b_K").mean(1)  # [head, b, d_head], mean over the key's own token
    scores = q @ k.transpose(-1, -2) / model.cfg.d_head**0.5  # [head, a, b]
    return torch.softmax(scores, -1).diagonal(dim1=-2, dim2=-1).mean(-1).tolist()


def ov_circuits(model: WeightedModel, residual: Tensor) -> Float[Tensor, "head k k"]:
    """[head, a, b]: what attending to a position holding a adds to the logit of b, per layer-1 head,
    through the final LayerNorm's centring and gain (its positive scale changes no argmax or sign)."""
    block = model.blocks[1]
    v = project(block, residual, block.attn.W_V, "b_V").mean(2)  # [head, a, d_head]
    return through_final_norm(model, v @ block.attn.W_O) @ model.W_U  # v W_O: [head, a, d_model]


def copying_score(circuit: Tensor) -> float:
    eigenvalues = torch.linalg.eigvals(shift_free(circuit.double()))
    return (eigenvalues.real.sum() / eigenvalues.abs().sum()).item()


def folded(block, weight: Tensor) -> Float[Tensor, "head d_model d_head"]:
    """[head, d_model, d_head]: ln1's centring and gain folded into the weight it feeds."""
    if not hasattr(block.ln1, "w"):
        return weight
    d_model = weight.shape[1]
    centre = torch.eye(d_model, dtype=weight.dtype) - 1.0 / d_model
    return (centre * block.ln1.w) @ weight


def composition(model: WeightedModel) -> dict[str, list[list[float]]]:
    """{mode: [layer-0 head][layer-1 head]} by TransformerLens's ``composition_scores``."""
    first, second = model.blocks[0], model.blocks[1]
    left = FactoredMatrix(folded(first, first.attn.W_V), first.attn.W_O)  # [h0, d_model, d_model]
    W_Q, W_K, W_V = (folded(second, w) for w in (second.attn.W_Q, second.attn.W_K, second.attn.W_V))
    right = {  # [h1, d_model, d_model]; broadcasting pairs every left with every right: [h0, h1]
        "Q": FactoredMatrix(W_Q, W_K.transpose(-1, -2)),
        "K": FactoredMatrix(W_K, W_Q.transpose(-1, -2)),
        "V": FactoredMatrix(W_V, second.attn.W_O),
    }
    return {mode: composition_scores(left, right[mode], broadcast_dims=True).tolist() for mode in COMPOSITION_MODES}


def progress_measures(model: WeightedModel, step: int = -1) -> ProgressMeasures:
    """Every progress measure of ``model`` (see the module docstring)."""
    reason = unmeasurable_reason(model)
    if reason:
        raise BadInput(reason)
    with torch.no_grad():
        residual = layer1_residuals(model)
        circuits = ov_circuits(model, residual)
        return ProgressMeasures(
            step=step,
            previous_token_match=previous_token_match(model),
            k_composition_match=k_composition_match(model, residual),
            ov_copying_accuracy=[(c.argmax(-1) == torch.arange(c.shape[0])).double().mean().item() for c in circuits],
            ov_copying_score=[copying_score(c) for c in circuits],
            composition=composition(model),
        )


def config_calibration(cfg) -> dict[str, Measure]:
    """:func:`calibration` for a model config (a run's ``model_config``: no checkpoint need be loaded)."""
    return calibration(cfg.d_vocab, cfg.n_ctx, cfg.d_model)


def first_crossing(results: list[ProgressMeasures], measure: Measure) -> int | None:
    """The first step at which the best head reaches the measure's threshold (None: never)."""
    return next((r.step for r in results if r.value(measure.name) >= measure.threshold), None)


def threshold_crossings(progress: list[ProgressMeasures], cfg, sequences_seen: dict[int, int]) -> dict[str, dict]:
    """Per calibrated measure of ``cfg``: its chance and construction values, its threshold, the value at
    the last of ``progress``, and the first step at which the best head reaches the threshold with the
    sequences seen by then (``sequences_seen`` by step; both None: never)."""
    rows = {}
    for name, measure in config_calibration(cfg).items():
        step = first_crossing(progress, measure)
        rows[name] = {
            "chance": measure.chance,
            "construction": measure.construction,
            "threshold": measure.threshold,
            "value": progress[-1].value(name),
            "first_step": step,
            "first_sequences": None if step is None else sequences_seen[step],
        }
    return rows
