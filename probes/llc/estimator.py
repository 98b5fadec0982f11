"""A local learning coefficient (LLC) estimator for any ``torch.nn.Module`` and loss, with default settings from
a stated rule and diagnostics that refuse what is not an estimate (Lau et al. 2023, "Quantifying degeneracy in
singular models via the learning coefficient"; devinterp's SGLD sampler does the sampling).

    λ̂(w*) = nβ · (E_w[L(w)] − L(w*)),  w drawn by SGLD from ∝ exp(−nβ L(w) − γ/2 ‖w − w*‖²)

``data`` is a tuple of tensors with samples along dim 0; ``loss_fn(model, batch)`` returns the mean loss of a
batch (a tuple of the same form), so that n·L is the data's negative log-likelihood up to a constant.

**Default settings (the rule).** With n samples and λ_max the largest eigenvalue of the Hessian of L at w*
(Lanczos on Hessian-vector products over all of the data, :mod:`.curvature`):

- nβ = n / ln n, the WBIC inverse temperature (Watanabe 2013).
- γ = 0.01 · nβ · λ_max. A direction of curvature h has posterior variance 1 / (nβ h + γ) and adds
  ½ · nβ h / (nβ h + γ) to the estimate: 1 % short of ½ for the stiffest, within 10 % for every direction with
  h > λ_max / 10. Directions flatter than γ / nβ = λ_max / 100 are held by the localization and count for less:
  the estimate counts the directions within a factor 100 of the stiffest. Where that matters (an
  ill-conditioned or singular point) the localization check below says so.
- step ε = 0.1 / (nβ s + γ), s = λ_max where the Hessian sets the posterior's scale: Euler-Maruyama on the
  stiffest direction (rate κ = nβ s + γ) is stable for εκ < 2 and its stationary variance is
  1 / (κ (1 − εκ/4)), 2.5 % too wide at εκ = 0.1. Where the loss along the top eigenvector rises far more
  than the Hessian predicts at the posterior's scale (a zero Hessian, K ∝ w⁴), λ_max and s are the loss's own
  secant and second difference there (:func:`.curvature.loss_scale`).
- burn-in 1 / (εγ) steps (a direction held by the localization alone relaxes as e^(−εγ t)), then as many draws,
  4 chains, batches of min(n, 256) samples. A step given so small that 1 / (εγ) passes 100,000 is refused unless
  the burn-in and draws are given too; a step below float32's smallest normal number is refused always.

Each draw records the batch's loss at w minus the same batch's loss at w* (a control variate: its mean is
L(w) − L(w*), and it removes the batch-to-batch spread of the loss, which at nβ = n / ln n is larger than the
rise itself); the estimate is nβ times the mean over the draws and chains.

**Diagnostics**: :mod:`.diagnostics` says what refuses an estimate and what flags it; the localization
check (:func:`localization_check`) is here.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_BURN_IN, MAX_CHAINS, MAX_DRAWS, require_at_most
from induction_probes.probes.llc.calibrated import verdict_for
from induction_probes.probes.llc.curvature import (
    curvature,
    gradient_shift,
    loss_scale,
    saddle,
    stiffer_than_its_hessian,
)
from induction_probes.probes.llc.diagnostics import diagnose, point_diagnostics
from induction_probes.probes.llc.sampling import chain_seed, sample

if TYPE_CHECKING:
    from torch import nn

# loss_fn(model, batch): the mean loss of the model on a batch, rows of the data: a tuple of tensors of the data's
# length (samples along dim 0), so that a loss may unpack the tuple it is written for, (x, y) or (tokens,)
Batch = TypeVar("Batch", bound=tuple[Tensor, ...])
LossFn = Callable[[torch.nn.Module, Batch], Tensor]

GAMMA_SHARE = 0.01  # γ / (nβ λ_max)
STEP_SHARE = 0.1  # ε (nβ λ_max + γ)
MAX_BATCH = 256
SMALLEST_STEP = float(torch.finfo(torch.float32).tiny)  # the sampler updates float32 weights: a smaller step is 0
MAX_RULE_STEPS = MAX_BURN_IN  # a burn-in the rule derives beyond this would sample for hours: it must be asked for
LIMITS = {"chains": MAX_CHAINS, "draws": MAX_DRAWS, "burn_in": MAX_BURN_IN}  # circuits/limits.py
CHECK_FACTOR = 0.25  # the stability check samples again at γ · this (module docstring)
CHECK_SHARE = 0.1  # the check flags a change beyond this share of the estimate (plus two standard errors)


class LLCError(BadInput):
    """Bad input to the estimator (the API's ValueError, one line)."""


@dataclass(frozen=True)
class LLCSettings:
    n_beta: float
    localization: float
    lr: float
    burn_in: int
    draws: int
    chains: int = 4
    batch_size: int = MAX_BATCH
    seed: int = 0
    localization_check: float | None = CHECK_FACTOR  # γ's factor in the stability check; None skips it
    rule: dict[str, Any] = field(default_factory=dict)  # how the defaults were derived: n, lambda_max, the two shares

    def __post_init__(self) -> None:
        for name in ("burn_in", "draws", "chains", "batch_size"):
            value = getattr(self, name)
            lowest = 0 if name == "burn_in" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise LLCError(f"{name} must be an integer >= {lowest}, got {value!r}")
        for name, limit in LIMITS.items():  # before a chain is copied or a step taken
            try:
                require_at_most(name, getattr(self, name), limit)
            except ValueError as error:
                raise LLCError(str(error)) from None
        if self.draws < 3:
            raise LLCError(f"draws must be at least 3 (the settling test compares thirds), got {self.draws}")
        for name in ("n_beta", "lr"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise LLCError(f"{name} must be a finite number > 0, got {value!r}")
        if self.lr < SMALLEST_STEP:
            raise LLCError(
                f"lr {self.lr:g} is below float32's smallest normal number {SMALLEST_STEP:.3g}: the "
                "sampler's float32 weights cannot move by such a step"
            )
        if not (
            isinstance(self.localization, (int, float)) and math.isfinite(self.localization) and self.localization >= 0
        ):
            raise LLCError(f"localization must be a finite number >= 0, got {self.localization!r}")
        check = self.localization_check
        if check is not None and not (isinstance(check, (int, float)) and 0 < check < 1):
            raise LLCError(f"localization_check must be None or a number in (0, 1), got {check!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"sampler": "devinterp SGMCMC.sgld"}


@dataclass(frozen=True)
class LLCResult:
    llc: float | None  # None where a diagnostic refuses it
    llc_std: float | None  # standard deviation over chains
    llc_stderr: float | None  # standard error of the mean over chains
    per_chain: list[float]
    chain_seeds: list[int]  # the sampler seed of each value in per_chain (:func:`.sampling.chain_seed`)
    init_loss: float
    loss_rise: float | None
    settings: LLCSettings | None
    diagnostics: dict[str, Any]
    problems: list[str]  # refusals
    flags: list[str]  # warnings
    calibration: dict[str, Any] = field(default_factory=dict)  # the verdict of its settings (:mod:`.calibrated`)

    def to_json(self) -> dict[str, Any]:
        return {
            key: (value.to_json() if key == "settings" and value is not None else value)
            for key, value in vars(self).items()
        }


def validate_data(data) -> int:
    if not isinstance(data, tuple) or not data or not all(isinstance(t, Tensor) for t in data):
        raise LLCError("data must be a non-empty tuple of tensors with samples along dim 0")
    n = len(data[0])
    if any(len(t) != n for t in data):
        raise LLCError(f"data's tensors disagree on the number of samples: {[len(t) for t in data]}")
    if n < 3:
        raise LLCError(f"data needs at least 3 samples (n / ln n), got {n}")
    return n


def default_settings(n: int, lambda_max: float, stiffness: float | None = None, **overrides) -> LLCSettings:
    """The documented rule (module docstring); any field given in ``overrides`` replaces its default.
    ``lambda_max`` sets γ; the step follows max(``lambda_max``, ``stiffness``), the stiffest curvature the
    posterior meets (the loss's own where its Hessian sets no scale, :func:`.curvature.loss_scale`)."""
    stiff = max(lambda_max, stiffness or 0.0)
    if not (math.isfinite(lambda_max) and lambda_max > 0 and math.isfinite(stiff)):
        raise LLCError(
            f"the Hessian's largest eigenvalue is {lambda_max:g}: the loss does not curve upward at "
            "this point, so no step size or localization follows from it"
        )
    unknown = set(overrides) - (set(LLCSettings.__dataclass_fields__) - {"rule"})
    if unknown:
        raise LLCError(f"unknown settings: {sorted(unknown)}")
    n_beta = inverse_temperature(n, overrides)
    gamma = overrides.get("localization", GAMMA_SHARE * n_beta * lambda_max)
    lr = overrides.get("lr", STEP_SHARE / (n_beta * stiff + gamma))
    if "lr" not in overrides and not lr >= SMALLEST_STEP:
        # the step is 0.1 over the sum of two rates: name the setting whose rate made it so small
        name, value = ("localization", gamma) if gamma > n_beta * stiff else ("n_beta", n_beta)
        raise LLCError(
            f"{name} {value:.3g} gives the rule's step size {lr:.3g}, below float32's smallest normal "
            f"number: give a smaller {name} or an lr"
        )
    values = {"n_beta": n_beta, "localization": gamma, "lr": lr, "batch_size": min(n, MAX_BATCH)}
    if not {"burn_in", "draws"} <= set(overrides):
        relax = relaxation_steps(lr, gamma)
        values |= {"burn_in": relax, "draws": relax}
    values |= overrides
    rule = {
        "n": n,
        "lambda_max": lambda_max,
        "stiffness": stiff,
        "gamma_share": GAMMA_SHARE,
        "step_share": STEP_SHARE,
        "overridden": sorted(overrides),
    }
    return LLCSettings(**values, rule=rule)


def inverse_temperature(n: int, given: dict) -> float:
    """nβ as given, else the rule's n / ln n (the WBIC temperature): the posterior's scale is measured at it
    before the other settings follow."""
    return given.get("n_beta", n / math.log(n))


def relaxation_steps(lr: float, gamma: float) -> int:
    """Steps per e-fold of a direction the localization holds, 1 / (ε γ) (1000 without localization); refused
    beyond :data:`MAX_RULE_STEPS`, where a tiny step would have the rule sample for hours."""
    if gamma == 0:
        return 1000
    rate = lr * gamma  # compared before dividing: it underflows to 0 for a subnormal product
    if not rate * MAX_RULE_STEPS >= 1:
        raise LLCError(
            f"lr {lr:.3g} with localization {gamma:.3g} needs {1 / rate if rate else math.inf:.3g} "
            f"steps per e-fold, more than {MAX_RULE_STEPS:,}: give burn_in and draws (--burn-in, --draws) "
            "or a larger lr"
        )
    return min(math.ceil(1.0 / rate), MAX_RULE_STEPS)  # 1 / rate may round above it


def posterior_scale(model: nn.Module, loss_fn, point: dict, n_beta: float, seed: int) -> dict:
    """The curvatures the rule sets γ and the step from: the Hessian's λ_max where it sets the posterior's
    scale, else the loss's own secant and stiffness there (:func:`.curvature.loss_scale`)."""
    if not stiffer_than_its_hessian(model, loss_fn, point, n_beta):
        return {"source": "hessian", "curvature": point["lambda_max"], "stiffness": point["lambda_max"]}
    probed = loss_scale(model, loss_fn, point, n_beta, seed)
    curvature_ = max(probed["secant"], point["lambda_max"], 0.0)
    return {"source": "loss", "curvature": curvature_, "stiffness": max(probed["stiffness"], curvature_)} | probed


def estimate_llc(model: torch.nn.Module, loss_fn: LossFn[Batch], data: Batch, **settings: float | None) -> LLCResult:
    """The LLC of ``model`` at its current weights; ``settings`` override fields of :func:`default_settings`
    (n_beta, localization, lr, burn_in, draws, chains, batch_size, seed, localization_check). The model is not
    changed. The result's ``calibration`` is the verdict of these settings (:func:`.calibrated.verdict_for`)."""
    return replace(sampled_estimate(model, loss_fn, data, **settings), calibration=verdict_for(settings))


def sampled_estimate(
    model: torch.nn.Module, loss_fn: LossFn[Batch], data: Batch, **settings: float | None
) -> LLCResult:
    """:func:`estimate_llc` before its calibration verdict is attached."""
    n = validate_data(data)
    seed = settings.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):  # torch's generators take integers alone
        raise LLCError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    model = model.train()
    point = curvature(model, loss_fn, data, seed=seed)
    if not (math.isfinite(point["loss"]) and math.isfinite(point["lambda_max"])):
        return refused(point, None, [f"non-finite: the loss {point['loss']:.3g} or its curvature is not a number"])
    point["saddle"] = saddle(point)
    n_beta = inverse_temperature(n, settings)
    point["scale"] = posterior_scale(model, loss_fn, point, n_beta, seed)
    if not point["scale"]["curvature"] > 0:
        return refused(point, None, [point["saddle"] or "flat: the loss rises along no direction probed"])
    chosen = default_settings(n, point["scale"]["curvature"], point["scale"]["stiffness"], **settings)
    point["shift"] = gradient_shift(model, loss_fn, point, chosen.n_beta, chosen.localization)
    sampled = sample(model, loss_fn, data, chosen)
    if isinstance(sampled, str):
        return refused(point, chosen, [sampled])
    rises, force = sampled
    values, problems, flags = diagnose(point, rises, chosen, force)
    per_chain = [chosen.n_beta * float(chain.mean()) for chain in rises]
    mean = sum(per_chain) / len(per_chain)
    std = float(torch.tensor(per_chain).std()) if len(per_chain) > 1 else 0.0
    if not all(map(math.isfinite, (*per_chain, mean, std))):  # finite draws whose nβ-scaled mean overflows
        return refused(point, chosen, [f"diverged: the estimate overflows (n_beta {chosen.n_beta:.3g})"])
    if not problems and (factor := chosen.localization_check) and chosen.localization > 0:
        check, flag = localization_check(model, loss_fn, data, chosen, per_chain, factor)
        values["localization_check"] = check
        flags += [flag] if flag else []
    return LLCResult(
        llc=None if problems else mean,
        llc_std=None if problems else std,
        llc_stderr=None if problems else std / math.sqrt(len(per_chain)),
        per_chain=per_chain,
        chain_seeds=[chain_seed(chosen.seed, c) for c in range(len(per_chain))],
        init_loss=point["loss"],
        loss_rise=float(rises.mean()),
        settings=chosen,
        diagnostics=values | {"estimate_if_accepted": mean},
        problems=problems,
        flags=flags,
    )


def localization_check(
    model: nn.Module, loss_fn, data, settings: LLCSettings, per_chain: list[float], factor: float
) -> tuple[dict, str]:
    """The estimate again at γ · ``factor`` (the settings' localization_check, :data:`CHECK_FACTOR` unless
    given), paired with the estimate's chains: each chain again with a burn-in longer by 1 / factor (the flattest
    localized direction relaxes that much slower), whose last burn-in and draws steps reuse its batches and noise
    (common random numbers, so directions the data hold move alike in both and the difference is the
    localization's). Flagged where the mean difference over chains exceeds :data:`CHECK_SHARE` of the estimate plus
    two standard errors of the paired differences."""
    check = replace(settings, localization=settings.localization * factor)
    lead = math.ceil(settings.burn_in / factor) - settings.burn_in
    sampled = sample(model, loss_fn, data, check, lead=lead)
    summary = {"localization": check.localization, "burn_in": settings.burn_in + lead, "draws": check.draws}
    if isinstance(sampled, str):
        return summary | {"estimate": None}, f"localization check failed at γ·{factor:g}: {sampled}"
    other_chains = [check.n_beta * float(chain.mean()) for chain in sampled[0]]
    differences = torch.tensor(other_chains, dtype=torch.float64) - torch.tensor(per_chain, dtype=torch.float64)
    llc, change = sum(per_chain) / len(per_chain), float(differences.mean())
    stderr = float(differences.std()) / math.sqrt(len(differences)) if len(differences) > 1 else 0.0
    summary |= {"estimate": llc + change, "change": change, "change_stderr": stderr, "per_chain": other_chains}
    if abs(change) <= CHECK_SHARE * abs(llc) + 2 * stderr:
        return summary, ""
    return summary, (
        f"depends on the localization: {llc:.3g} at γ {settings.localization:.3g}, {llc + change:.3g} at "
        f"γ·{factor:g} (paired change {change:+.3g} ± {stderr:.2g}); directions flatter than γ/nβ are held by "
        "the localization, not the data"
    )


def refused(point: dict, settings: LLCSettings | None, problems: list[str]) -> LLCResult:
    return LLCResult(
        llc=None,
        llc_std=None,
        llc_stderr=None,
        per_chain=[],
        chain_seeds=[],
        init_loss=point["loss"],
        loss_rise=None,
        settings=settings,
        diagnostics=point_diagnostics(point),
        problems=problems,
        flags=[],
    )
