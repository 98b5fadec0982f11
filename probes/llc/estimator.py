"""A local learning coefficient (LLC) estimator for any ``torch.nn.Module`` and loss, with default settings from
a stated rule and diagnostics that refuse what is not an estimate (Lau et al. 2023, "Quantifying degeneracy in
singular models via the learning coefficient"; devinterp's SGLD sampler does the sampling).

    λ̂(w*) = nβ · (E_w[L(w)] − L(w*)),  w drawn by SGLD from ∝ exp(−nβ L(w) − γ/2 ‖w − w*‖²)

``data`` is a tuple of tensors with samples along dim 0; ``loss_fn(model, batch)`` returns the mean loss of a
batch (a tuple of the same form), so that n·L is the data's negative log-likelihood up to a constant.

**Default settings (the rule).** With n samples and λ_max the largest eigenvalue of the Hessian of L at w*
(Lanczos on Hessian-vector products over the first :data:`.curvature.CURVATURE_SAMPLES` samples):

- nβ = n / ln n, the WBIC inverse temperature (Watanabe 2013).
- γ = 0.01 · nβ · λ_max. A direction of curvature h has posterior variance 1 / (nβ h + γ) and adds
  ½ · nβ h / (nβ h + γ) to the estimate: 1 % short of ½ for the stiffest, within 10 % for every direction with
  h > λ_max / 10. Directions flatter than γ / nβ = λ_max / 100 are held by the localization and count for less:
  the estimate counts the directions within a factor 100 of the stiffest.
- step ε = 0.1 / (nβ λ_max + γ): Euler-Maruyama on the stiffest direction (rate κ = nβ λ_max + γ) is stable for
  εκ < 2 and its stationary variance is 1 / (κ (1 − εκ/4)), 2.5 % too wide at εκ = 0.1.
- burn-in 1 / (εγ) steps (a direction held by the localization alone relaxes as e^(−εγ t)), then as many draws,
  4 chains, batches of min(n, 256) samples. A step given so small that 1 / (εγ) passes 100,000 is refused unless
  the burn-in and draws are given too; a step below float32's smallest normal number is refused always.

Each draw records the batch's loss at w minus the same batch's loss at w* (a control variate: its mean is
L(w) − L(w*), and it removes the batch-to-batch spread of the loss, which at nβ = n / ln n is larger than the
rise itself); the estimate is nβ times the mean over the draws and chains.

**Diagnostics** (in ``diagnostics``; ``problems`` refuse — the estimate is then None, never a number —
``flags`` warn):

- *not a minimum* (refuses): a gradient g at w* lowers the sampled nβ·rise by (nβ g)ᵀ (nβ H + γ I)⁻¹ (nβ g)
  for a quadratic loss (:func:`gradient_shift`, by conjugate gradients). Refused where that shift exceeds 10 %
  of the estimate (or 0.5, a regular parameter's share, where the estimate is below 5), where H has a direction
  of negative curvature, where λ_max is not positive, or where the mean rise is below zero by more than two
  standard errors (the chains found lower loss).
- *non-finite or diverged* (refuses): a NaN or infinite loss, or a chain whose LLC exceeds d, twice the largest
  value a learning coefficient can take (d/2): the chain has left the neighbourhood of w*.
- *far above* (flags): the estimate, i.e. the mean rise times nβ, exceeds 1.1 · d/2 (no coefficient does; 1.1
  allows the step's and minibatches' few per cent) by more than two standard errors.
- *not settled* (flags): the mean over the last third of each chain's draws minus that over the middle
  third; flagged where its mean over chains is above 10 % of the rise plus two standard errors over chains.
- *localization-bound* (flags): the root-mean-square over draws of ‖γ(w − w*)‖ against ‖nβ ∇L_batch‖; above 1
  the pull back to w* is stronger than the data's and the estimate measures γ more than the loss.
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import asdict, dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.probes.llc.curvature import curvature, gradient_shift, sampled_parameters

GAMMA_SHARE = 0.01  # γ / (nβ λ_max)
STEP_SHARE = 0.1  # ε (nβ λ_max + γ)
MAX_BATCH = 256
FORCE_EVERY = 10  # draws between two readings of the localization and data forces
SMALLEST_STEP = float(torch.finfo(torch.float32).tiny)  # the sampler updates float32 weights: a smaller step is 0
MAX_RULE_STEPS = 100_000  # a burn-in the rule derives beyond this would sample for hours: it must be asked for


class LLCError(ValueError):
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
    rule: dict = field(default_factory=dict)  # how the defaults were derived: n, lambda_max, the two shares

    def __post_init__(self) -> None:
        for name in ("burn_in", "draws", "chains", "batch_size"):
            value = getattr(self, name)
            lowest = 0 if name == "burn_in" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise LLCError(f"{name} must be an integer >= {lowest}, got {value!r}")
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

    def to_json(self) -> dict:
        return asdict(self) | {"sampler": "devinterp SGMCMC.sgld"}


@dataclass(frozen=True)
class LLCResult:
    llc: float | None  # None where a diagnostic refuses it
    llc_std: float | None  # standard deviation over chains
    llc_stderr: float | None  # standard error of the mean over chains
    per_chain: list[float]
    init_loss: float
    loss_rise: float | None
    settings: LLCSettings | None
    diagnostics: dict
    problems: list[str]  # refusals
    flags: list[str]  # warnings

    def to_json(self) -> dict:
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


def default_settings(n: int, lambda_max: float, **overrides) -> LLCSettings:
    """The documented rule (module docstring); any field given in ``overrides`` replaces its default."""
    if not (math.isfinite(lambda_max) and lambda_max > 0):
        raise LLCError(
            f"the Hessian's largest eigenvalue is {lambda_max:g}: the loss does not curve upward at "
            "this point, so no step size or localization follows from it"
        )
    unknown = set(overrides) - (set(LLCSettings.__dataclass_fields__) - {"rule"})
    if unknown:
        raise LLCError(f"unknown settings: {sorted(unknown)}")
    n_beta = overrides.get("n_beta", n / math.log(n))
    gamma = overrides.get("localization", GAMMA_SHARE * n_beta * lambda_max)
    lr = overrides.get("lr", STEP_SHARE / (n_beta * lambda_max + gamma))
    if "lr" not in overrides and not lr >= SMALLEST_STEP:
        # the step is 0.1 over the sum of two rates: name the setting whose rate made it so small
        name, value = ("localization", gamma) if gamma > n_beta * lambda_max else ("n_beta", n_beta)
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
        "gamma_share": GAMMA_SHARE,
        "step_share": STEP_SHARE,
        "overridden": sorted(overrides),
    }
    return LLCSettings(**values, rule=rule)


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
    return math.ceil(1.0 / rate)


def run_chain(model, loss_fn, data, settings: LLCSettings, chain: int) -> dict:
    """One SGLD chain from w*: at every draw the batch loss minus the same batch's loss at w*, and the
    localization-to-data force ratio."""
    from devinterp.optim import SGMCMC  # the llc extra: needed only to sample, not to import the estimator

    n = len(data[0])
    replica, anchor = copy.deepcopy(model), copy.deepcopy(model)  # the anchor stays at w*
    params = sampled_parameters(replica)
    start = [p.detach().clone() for p in params]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # devinterp warns about nβ = 1, which a caller may mean
        sampler = SGMCMC.sgld(params, lr=settings.lr, localization=settings.localization, nbeta=settings.n_beta)
    generator = torch.Generator().manual_seed(settings.seed * 1000 + chain)
    # devinterp draws the noise where the parameters are, and torch draws only from a generator of that device:
    # on the CPU the batches' generator serves both (the numbers calibrated so far), elsewhere a second one
    device = params[0].device
    noise = generator if device.type == "cpu" else torch.Generator(device).manual_seed(settings.seed * 1000 + chain)
    rises, force_loc, force_data = [], 0.0, 0.0
    for step in range(settings.burn_in + settings.draws):
        index = torch.randint(n, (settings.batch_size,), generator=generator)
        sampler.zero_grad()
        batch = tuple(t[index] for t in data)
        loss = loss_fn(replica, batch)
        if not math.isfinite(float(loss.detach())):
            return {"rises": rises, "diverged_at": step}
        loss.backward()
        if step >= settings.burn_in:
            with torch.no_grad():  # the same batch at w*: a control variate with the same mean as L(w*)
                rises.append(float(loss.detach() - loss_fn(anchor, batch)))
            if (step - settings.burn_in) % FORCE_EVERY == 0:
                with torch.no_grad():
                    force_loc += sum(float(((p - s) ** 2).sum()) for p, s in zip(params, start))
                    force_data += sum(float((p.grad**2).sum()) for p in params if p.grad is not None)
        try:
            sampler.step(noise_generator=noise)
        except RuntimeError as error:  # a step size past float32's range: the update itself overflows
            if "overflow" not in str(error):
                raise
            return {"rises": rises, "diverged_at": step}
    # the two forces' ratio, (γ √force_loc) / (nβ √force_data), without squaring γ or nβ (nβ = 1e300 overflows)
    ratio = (
        settings.localization * math.sqrt(force_loc) / settings.n_beta / math.sqrt(force_data)
        if force_data > 0
        else None
    )
    return {"rises": rises, "diverged_at": None, "force_ratio": ratio}


def settling(rises: Float[Tensor, "chain draw"]) -> tuple[float, float]:
    """Mean over chains of (last third − middle third) of each chain's draws, and its standard error."""
    third = rises.shape[1] // 3
    differences = rises[:, -third:].mean(1) - rises[:, -2 * third : -third].mean(1)
    stderr = float(differences.std() / math.sqrt(len(differences))) if len(differences) > 1 else 0.0
    return float(differences.mean()), stderr


def diagnose(
    point: dict, rises: Float[Tensor, "chain draw"], settings: LLCSettings, force_ratio: float | None
) -> tuple[dict, list, list]:
    """The diagnostics of the module docstring: (values, problems that refuse, flags that warn)."""
    rise = float(rises.mean())
    llc = settings.n_beta * rise
    chain_rises = rises.mean(1)
    shift = point["shift"]
    drift, drift_se = settling(rises)
    bound = point["n_params"] / 2
    chain_stderr = 0.0
    if len(chain_rises) > 1:
        chain_stderr = settings.n_beta * float(chain_rises.std()) / math.sqrt(len(chain_rises))
    values = {
        "gradient_shift": shift,
        "grad_norm": point["grad_norm"],
        "lambda_max": point["lambda_max"],
        "drift": drift,
        "drift_stderr": drift_se,
        "force_ratio": force_ratio,
        "rise_bound": bound / settings.n_beta,
    }
    problems, flags = [], []
    if shift is None:
        problems.append("not a minimum: the Hessian has a direction of negative curvature")
    elif shift > 0.1 * max(abs(llc), 5.0):
        problems.append(
            f"not a minimum: the gradient (norm {point['grad_norm']:.3g}) shifts the sampled loss by "
            f"about {shift:.3g} in LLC units, more than 10 % of the estimate {llc:.3g}"
        )
    if llc + 2 * chain_stderr < 0:
        problems.append(f"the chains found lower loss than the point's (rise {rise:.3g}): not a local minimum")
    if float(chain_rises.max()) * settings.n_beta > 2 * bound:
        problems.append(
            f"diverged: a chain's LLC {float(chain_rises.max()) * settings.n_beta:.3g} exceeds d = "
            f"{2 * bound:g}, twice the largest possible value: the chain left the point's neighbourhood"
        )
    elif llc > 1.1 * bound + 2 * chain_stderr:  # 1.1: the step size's and minibatches' bias (docstring)
        flags.append(f"far above: the estimate {llc:.3g} exceeds d/2 = {bound:g}, which no learning coefficient does")
    if abs(drift) > 0.1 * abs(rise) + 2 * drift_se:
        flags.append(
            f"not settled: the last third of the draws differs from the middle third by {drift:.3g} "
            f"(rise {rise:.3g}); more draws or a smaller step are needed"
        )
    if force_ratio is None or force_ratio > 1:
        flags.append(
            "localization-bound: the pull to the point is stronger than the data's gradient (ratio "
            f"{'infinite' if force_ratio is None else f'{force_ratio:.3g}'})"
        )
    return values, problems, flags


def estimate_llc(model: torch.nn.Module, loss_fn, data: tuple[Tensor, ...], **settings) -> LLCResult:
    """The LLC of ``model`` at its current weights; ``settings`` override fields of :func:`default_settings`
    (n_beta, localization, lr, burn_in, draws, chains, batch_size, seed). The model is not changed."""
    n = validate_data(data)
    model = model.train()
    point = curvature(model, loss_fn, data, seed=settings.get("seed", 0))
    if not (math.isfinite(point["lambda_max"]) and point["lambda_max"] > 0):
        return refused(point, None, [f"not a minimum: the Hessian's largest eigenvalue is {point['lambda_max']:.3g}"])
    chosen = default_settings(n, point["lambda_max"], **settings)
    point["shift"] = gradient_shift(model, loss_fn, point, chosen.n_beta, chosen.localization)
    chains = [run_chain(model, loss_fn, data, chosen, c) for c in range(chosen.chains)]
    diverged = [i for i, c in enumerate(chains) if c["diverged_at"] is not None]
    if diverged:
        at = chains[diverged[0]]["diverged_at"]
        return refused(point, chosen, [f"diverged: chain {diverged[0]} reached a non-finite loss at step {at}"])
    rises = torch.tensor([c["rises"] for c in chains], dtype=torch.float64)  # [chain, draw]
    if not bool(rises.any()):  # every draw is w* itself: the step cannot change a float32 weight
        return refused(
            point,
            chosen,
            ["never moved: every sampled loss equals the point's (the step size is too small to change a weight)"],
        )
    ratios = [c["force_ratio"] for c in chains]
    force = None if None in ratios else math.sqrt(sum(r**2 for r in ratios) / len(ratios))
    values, problems, flags = diagnose(point, rises, chosen, force)
    per_chain = [chosen.n_beta * float(chain.mean()) for chain in rises]
    mean = sum(per_chain) / len(per_chain)
    std = float(torch.tensor(per_chain).std()) if len(per_chain) > 1 else 0.0
    if not all(map(math.isfinite, (*per_chain, mean, std))):  # finite draws whose nβ-scaled mean overflows
        return refused(point, chosen, [f"diverged: the estimate overflows (n_beta {chosen.n_beta:.3g})"])
    return LLCResult(
        llc=None if problems else mean,
        llc_std=None if problems else std,
        llc_stderr=None if problems else std / math.sqrt(len(per_chain)),
        per_chain=per_chain,
        init_loss=point["loss"],
        loss_rise=float(rises.mean()),
        settings=chosen,
        diagnostics=values | {"estimate_if_accepted": mean},
        problems=problems,
        flags=flags,
    )


def refused(point: dict, settings: LLCSettings | None, problems: list[str]) -> LLCResult:
    return LLCResult(
        llc=None,
        llc_std=None,
        llc_stderr=None,
        per_chain=[],
        init_loss=point["loss"],
        loss_rise=None,
        settings=settings,
        diagnostics={"lambda_max": point["lambda_max"] if math.isfinite(point["lambda_max"]) else None},
        problems=problems,
        flags=[],
    )
