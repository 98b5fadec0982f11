"""What :func:`~induction_probes.probes.llc.estimator.estimate_llc` reports of its draws, in its result's
``diagnostics``; ``problems`` refuse (the estimate is then None, never a number), ``flags`` warn:

- *not a minimum* (refuses): a saddle, where the Hessian's most negative curvature on all of the data is below
  zero beyond its spread over disjoint subsets, and so is that direction's held out
  (:func:`.curvature.saddle`): a flat direction of an exact minimum is never refused for its noise. Or a
  gradient g at w* that lowers the sampled nβ·rise by (nβ g)ᵀ (nβ H + γ I)⁻¹ (nβ g) for a quadratic loss
  (:func:`.curvature.gradient_shift`, by conjugate gradients) by more than 10 % of the estimate (or 0.5, a
  regular parameter's share, where the estimate is below 5); or a mean rise below zero by more than two
  standard errors (the chains found lower loss); or a loss that rises along no direction probed.
- *non-finite or diverged* (refuses): a NaN or infinite loss, or a chain whose LLC exceeds d, twice the largest
  value a learning coefficient can take (d/2): the chain has left the neighbourhood of w*.
- *far above* (flags): the estimate, i.e. the mean rise times nβ, exceeds 1.1 · d/2 (no coefficient does; 1.1
  allows the step's and minibatches' few per cent) by more than two standard errors.
- *not settled* (flags): the mean over the last third of each chain's draws minus that over the middle
  third; flagged where its mean over chains is above 10 % of the rise plus two standard errors over chains.
- *imprecise* (flags): two standard errors over the chains exceed :data:`PRECISION` (20 %) of the estimate,
  the tolerance the calibration is held to.
- *degenerate* (flags): the Hessian's flattest direction (Lanczos's bottom) curves less than γ / nβ: the
  localization, not the data, holds it, and the estimate rests on the loss's higher-order terms. There the
  estimator's bias can be larger than its chains' spread: y = w1·w2·x at (4, 0.25), on a data seed the
  calibration does not use, read +19 % with a standard error of 3 % and no other flag. A well-conditioned
  regular model is never flagged; an ill-conditioned one is (curvatures spanning 1000×, the calibration's
  ``linear-d20-spread1000``).
- *localization-bound* (flags): the root-mean-square over draws of ‖γ(w − w*)‖ against ‖nβ ∇L_batch‖; above 1
  the pull back to w* is stronger than the data's and the estimate measures γ more than the loss.
- *depends on the localization* (flags; :func:`.estimator.localization_check`): every chain again at γ/4,
  paired with it by common random numbers over its draws, with a burn-in 4 times as long; flagged where the
  paired change exceeds 10 % of the estimate plus two standard errors. An ill-conditioned regular model (curvatures
  spanning 1000×, λ = 10) reads 7.0 at γ and 9.1 at γ/4, and is flagged. ``localization_check=None`` skips
  it (it costs 2.5 times the estimate).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from jaxtyping import Float
from torch import Tensor

if TYPE_CHECKING:
    from induction_probes.probes.llc.estimator import LLCSettings

PRECISION = 0.2  # two standard errors over chains beyond this share of the estimate are flagged (module docstring)


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
        **point_diagnostics(point),
        "drift": drift,
        "drift_stderr": drift_se,
        "force_ratio": force_ratio,
        "rise_bound": bound / settings.n_beta,
    }
    problems, flags = [], []
    if point.get("saddle"):
        problems.append(point["saddle"])
    if shift > 0.1 * max(abs(llc), 5.0):
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
    if len(chain_rises) > 1 and 2 * chain_stderr > PRECISION * abs(llc):
        flags.append(
            f"imprecise: two standard errors over the chains, {2 * chain_stderr:.3g}, are more than "
            f"{PRECISION:.0%} of the estimate {llc:.3g}; more chains or draws are needed"
        )
    if (degenerate := flat_direction(point, settings)) is not None:
        flags.append(degenerate)
    if force_ratio is None or force_ratio > 1:
        flags.append(
            "localization-bound: the pull to the point is stronger than the data's gradient (ratio "
            f"{'infinite' if force_ratio is None else f'{force_ratio:.3g}'})"
        )
    return values, problems, flags


def flat_direction(point: dict, settings: LLCSettings) -> str | None:
    """The *degenerate* flag (module docstring): the Hessian's flattest direction curves less than γ / nβ, so
    the localization holds it rather than the data, and the estimate rests on the loss's higher-order terms."""
    lowest = point.get("lambda_min")
    if lowest is None or not math.isfinite(lowest) or settings.n_beta * lowest >= settings.localization:
        return None
    return (
        f"degenerate: the flattest direction's curvature {lowest:.3g} is below γ/nβ = "
        f"{settings.localization / settings.n_beta:.3g}, so the localization holds it, not the data; there the "
        "estimate rests on the loss's higher-order terms, where its bias can exceed the chains' spread (as on the "
        "calibration's degenerate cases)"
    )


def point_diagnostics(point: dict) -> dict:
    """What the point's measurement (:func:`.curvature.curvature`) shows, as JSON numbers."""

    def number(value):
        return value if value is None or math.isfinite(value) else None

    held_out = point.get("held_out") or {}
    return {
        "grad_norm": number(point["grad_norm"]),
        "lambda_max": number(point["lambda_max"]),
        "lambda_min": number(point["lambda_min"]),
        "lambda_min_stderr": point.get("lambda_min_stderr"),
        "held_out_curvature": held_out.get("curvature"),
        "held_out_stderr": held_out.get("stderr"),
        "lanczos": point.get("lanczos"),
        "scale": point.get("scale"),
    }
