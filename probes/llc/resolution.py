"""One resolution for every checkpoint of a comparison over training.

The estimator's rule (:mod:`.estimator`) sets the localization γ = 0.01 · nβ · λ_max and the step from the
curvature at the point it is asked about. Asked about each checkpoint alone, it localizes each at its own
strength: on ``markov-k3`` the induction head's γ was 2.07 on the plateau and 18.7 at the end, so its LLC
counted directions within a factor 100 of a stiffness that grew nine-fold, and values over training compared
different resolutions. A comparison across checkpoints therefore samples every checkpoint at one γ and one
step (nβ = n / ln n is already one: the same n everywhere):

**The series rule.** The curvature of the posterior (:func:`~.estimator.posterior_scale`) at every checkpoint
compared, on the same data; the rule's γ and step at the largest of them. Every checkpoint is then localized
at least as strongly as the rule asks for it alone, and sampled with a step stable at the stiffest one. Each
record carries this as its ``resolution`` (γ, step, the curvature of each checkpoint, which one set it).

A single checkpoint keeps the rule at its own curvature, labelled ``"per step"``. The γ/4 check that the
estimator runs beside every estimate (:func:`~.estimator.localization_check`) is then a second resolution
common to the series too, and a change over training is called real only where both agree
(:func:`~.chain_intervals.change_between`).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from induction_probes.probes.llc.curvature import curvature
from induction_probes.probes.llc.estimator import default_settings, inverse_temperature, posterior_scale, validate_data

PER_STEP = "per step"  # the rule at each checkpoint's own curvature: for single estimates, never compared
SERIES = "one for the series"  # the rule at the largest curvature over the checkpoints compared


def series_settings(
    models: list[nn.Module], loss_fn, data: tuple[Tensor, ...], *, labels: list | None = None, **settings
) -> tuple[dict, dict]:
    """(``settings`` with one localization and step for every model, the resolution record): the series rule
    (module docstring) over ``models``, each at its current weights on ``data``, named by ``labels`` (their
    steps) in the record. One model, or γ and the step both given, keep ``settings`` as they are, labelled per
    step or as given."""
    if "localization" in settings and "lr" in settings:
        return settings, {"rule": "given", "localization": settings["localization"], "lr": settings["lr"]}
    if len(models) < 2:
        return settings, {"rule": PER_STEP}
    n = validate_data(data)
    n_beta, seed = inverse_temperature(n, settings), settings.get("seed", 0)
    scales = [checkpoint_scale(model, loss_fn, data, n_beta, seed) for model in models]
    usable = [i for i, scale in enumerate(scales) if scale is not None]
    if not usable:  # no checkpoint curves upward: each is refused by the estimator, which says why
        return settings, {"rule": PER_STEP}
    labels = list(range(len(models))) if labels is None else labels
    stiffest = max(usable, key=lambda i: scales[i]["curvature"])
    chosen = default_settings(n, scales[stiffest]["curvature"], max(scales[i]["stiffness"] for i in usable), **settings)
    fixed = {"localization": chosen.localization, "lr": chosen.lr}
    if not {"burn_in", "draws"} <= set(settings):  # the rule's burn-in and draws follow γ and the step
        fixed |= {"burn_in": chosen.burn_in, "draws": chosen.draws}
    resolution = {
        "rule": SERIES,
        "localization": chosen.localization,
        "lr": chosen.lr,
        "n_beta": chosen.n_beta,
        "curvatures": {
            str(label): None if scale is None else scale["curvature"] for label, scale in zip(labels, scales)
        },
        "set_by": labels[stiffest],
    }
    return settings | fixed, resolution


def checkpoint_scale(model: nn.Module, loss_fn, data: tuple[Tensor, ...], n_beta: float, seed: int) -> dict | None:
    """The posterior's curvature and stiffness at one model (as :func:`~.estimator.estimate_llc` finds them),
    or None where the loss has no finite upward curvature there."""
    point = curvature(model.train(), loss_fn, data, seed=seed)
    if not (math.isfinite(point["loss"]) and math.isfinite(point["lambda_max"])):
        return None
    scale = posterior_scale(model, loss_fn, point, n_beta, seed)
    return scale if scale["curvature"] > 0 and math.isfinite(scale["stiffness"]) else None
