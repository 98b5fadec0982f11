"""One resolution for every checkpoint of a comparison over training.

The estimator's rule (:mod:`.estimator`) sets the localization γ = 0.01 · nβ · λ_max and the step from the
curvature at the point it is asked about. Asked about each checkpoint alone, it localizes each at its own
strength: on ``markov-k3`` the induction head's γ was 2.07 on the plateau and 18.7 at the end, so its LLC
counted directions within a factor 100 of a stiffness that grew nine-fold, and values over training compared
different resolutions. A comparison across checkpoints therefore samples every checkpoint at one γ and one
step (nβ = n / ln n is already one: the same n everywhere):

**The series rule.** The curvature of the posterior (:func:`~.estimator.posterior_scale`) at every checkpoint
compared, on the same data; the rule's γ and step at the largest of them, over the checkpoints that are minima:
a checkpoint the checks before sampling refuse (a saddle, no upward curvature) does not set γ, and where the
one that set it is refused after sampling as no minimum, γ is resolved again without it (:func:`sample_series`),
so a series' γ never depends on whether a saddle was listed. Every checkpoint is then localized
at least as strongly as the rule asks for it alone, and sampled with a step stable at the stiffest one. Each
record carries this as its ``resolution`` (γ, step, the curvature of each checkpoint, which one set it).

A single checkpoint keeps the rule at its own curvature, labelled ``"per step"``. The γ/4 check that the
estimator runs beside every estimate (:func:`~.estimator.localization_check`) is then a second resolution
common to the series too, and a change over training is called real only where both agree
(:func:`~.chain_intervals.change_between`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn

from induction_probes.probes.llc.curvature import curvature, saddle
from induction_probes.probes.llc.estimator import (
    LLCError,
    default_settings,
    inverse_temperature,
    posterior_scale,
    validate_data,
)

PER_STEP = "per step"  # the rule at each checkpoint's own curvature: for single estimates, never compared
SERIES = "one for the series"  # the rule at the largest curvature over the checkpoints compared


NOT_A_MINIMUM = ("not a minimum", "the chains found lower loss")  # refusals of the point, not of the sampler


class NoResolution(LLCError):
    """No checkpoint of a series is a minimum the rule can take γ from (bad input: one line, status 2)."""


def series_settings(
    models: Sequence[nn.Module], loss_fn, data: tuple[Tensor, ...], *, labels: list | None = None, **settings
) -> tuple[dict, dict]:
    """(``settings`` with one localization and step for every model, the resolution record): the series rule
    (module docstring) over ``models``, each at its current weights on ``data``, named by ``labels`` (their
    steps) in the record. One model, or γ and the step both given, keep ``settings`` as they are, labelled per
    step or as given."""
    scales = series_scales(models, loss_fn, data, **settings)
    if isinstance(scales, dict):
        return settings, scales
    labels = list(range(len(models))) if labels is None else labels
    return resolved(scales, labels, validate_data(data), settings)


def sample_series(
    models: Sequence[nn.Module], loss_fn, data: tuple[Tensor, ...], estimate, *, labels: list, **settings
) -> tuple[list[dict], dict]:
    """Every model sampled at the series' resolution: ``estimate(model, settings)`` gives a record with its
    ``problems``. Where the checkpoint that set γ is refused after sampling as not a minimum, γ is resolved
    again without it and every model sampled again, so that γ always comes from a minimum."""
    scales = series_scales(models, loss_fn, data, **settings)
    if isinstance(scales, dict):
        return [estimate(model, settings) for model in models], scales
    n, refused_after = validate_data(data), {}
    while True:
        series, resolution = resolved(scales, labels, n, settings, refused_after)
        records = [estimate(model, series) for model in models]
        setter = records[labels.index(resolution["set_by"])]
        reason = next((p for p in setter["problems"] if any(mark in p for mark in NOT_A_MINIMUM)), None)
        if reason is None:
            return records, resolution
        refused_after[resolution["set_by"]] = reason


def series_scales(models: Sequence[nn.Module], loss_fn, data: tuple[Tensor, ...], **settings) -> list[dict] | dict:
    """Each model's :func:`checkpoint_scale`, or the resolution record where no series rule applies (one model,
    or γ and the step both given)."""
    if "localization" in settings and "lr" in settings:
        return {"rule": "given", "localization": settings["localization"], "lr": settings["lr"]}
    if len(models) < 2:
        return {"rule": PER_STEP}
    n_beta, seed = inverse_temperature(validate_data(data), settings), settings.get("seed", 0)
    return [checkpoint_scale(model, loss_fn, data, n_beta, seed) for model in models]


def resolved(scales: list[dict], labels: list, n: int, settings: dict, refused_after: dict | None = None) -> tuple:
    """(settings, resolution record) at the stiffest checkpoint that is a minimum: neither refused before
    sampling (its ``refused``) nor after (``refused_after``: label → reason). None left: :class:`NoResolution`."""
    refused_after = refused_after or {}
    refusals = {str(label): scale["refused"] for label, scale in zip(labels, scales) if "refused" in scale}
    refusals |= {str(label): reason for label, reason in refused_after.items()}
    usable = [i for i, label in enumerate(labels) if str(label) not in refusals]
    if not usable:
        raise NoResolution(
            f"no checkpoint of the series is a minimum to take γ from: {first_refusal(refusals)}; "
            "give --localization and --lr, or other steps"
        )
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
        "curvatures": {str(label): scale.get("curvature") for label, scale in zip(labels, scales)},
        "set_by": labels[stiffest],
        "not_setting": refusals,  # checkpoints that are no minimum, and why: they do not set γ
    }
    return settings | fixed, resolution


def first_refusal(refusals: dict) -> str:
    label, reason = next(iter(refusals.items()))
    more = f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else ""
    return f"step {label}: {reason}{more}"


def checkpoint_scale(model: nn.Module, loss_fn, data: tuple[Tensor, ...], n_beta: float, seed: int) -> dict:
    """The posterior's curvature and stiffness at one model (as :func:`~.estimator.estimate_llc` finds them),
    or ``{"refused": why}`` where the checks before sampling refuse it: no finite upward curvature, or a
    saddle (:func:`~.curvature.saddle`)."""
    point = curvature(model.train(), loss_fn, data, seed=seed)
    if not (math.isfinite(point["loss"]) and math.isfinite(point["lambda_max"])):
        return {"refused": f"non-finite: the loss {point['loss']:.3g} or its curvature is not a number"}
    if reason := saddle(point):
        return {"refused": reason}
    scale = posterior_scale(model, loss_fn, point, n_beta, seed)
    if not (scale["curvature"] > 0 and math.isfinite(scale["stiffness"])):
        return {"refused": "flat: the loss rises along no direction probed"}
    return scale
