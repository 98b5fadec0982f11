"""The SGLD chains of :mod:`.estimator`: each chain starts at w*, draws its batches and noise from its own seed,
and records every draw's rise over the same batch's loss at w*. Split from the estimator, which sets the
chains' settings and reads their rises."""

from __future__ import annotations

import copy
import functools
import math
import warnings
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.llc.curvature import sampled_parameters

if TYPE_CHECKING:
    from torch import nn

FORCE_EVERY = 10  # draws between two readings of the localization and data forces
LEAD_SEED = 500  # a chain's lead (the localization check's extra burn-in) draws from seed + this; chains are 1000 apart
SEEDS_PER_ESTIMATE = 1000  # chain c of an estimate at seed s samples from s · this + c (chains < LEAD_SEED)
INSTALL_LLC = "pip install 'induction-probes[llc]'"


class MissingExtra(BadInput):
    """An optional extra the work needs is not installed (bad input to the command: one line, status 2)."""


def sgld_sampler() -> type:
    """devinterp's SGMCMC, the llc extra's: needed only to sample, not to import the estimator. Without it, a
    :class:`MissingExtra` (bad input, one line) that names the install command, as ``sweep --backend ray`` does."""
    try:
        from devinterp.optim import SGMCMC  # the llc extra: needed only to sample, not to import the estimator
    except ImportError:
        raise MissingExtra(f"the LLC's SGLD sampler needs devinterp (the llc extra): {INSTALL_LLC}") from None
    return SGMCMC


def sample(model: nn.Module, loss_fn, data, settings, lead: int = 0) -> tuple[Tensor, float | None] | str:
    """The chains' rises [chain, draw] and their root-mean-square force ratio, or why there are none."""
    chains = [run_chain(model, loss_fn, data, settings, c, lead) for c in range(settings.chains)]
    diverged = [i for i, c in enumerate(chains) if c["diverged_at"] is not None]
    if diverged:
        at = chains[diverged[0]]["diverged_at"]
        return f"diverged: chain {diverged[0]} reached a non-finite loss at step {at}"
    rises = torch.tensor([c["rises"] for c in chains], dtype=torch.float64)  # [chain, draw]
    if not bool(rises.any()):  # every draw is w* itself: the step cannot change a float32 weight
        return "never moved: every sampled loss equals the point's (the step size is too small to change a weight)"
    ratios = [c["force_ratio"] for c in chains]
    force = None if None in ratios else math.sqrt(sum(r**2 for r in ratios) / len(ratios))
    return rises, force


def run_chain(model: nn.Module, loss_fn, data, settings, chain: int, lead: int = 0) -> dict:
    """One SGLD chain from w*: at every draw the batch loss minus the same batch's loss at w*, and the
    localization-to-data force ratio. ``lead`` steps more of burn-in come first, on a generator of their own,
    so that the last ``burn_in + draws`` steps see the batches and noise of the chain without a lead (the
    localization check's common random numbers)."""
    SGMCMC = sgld_sampler()
    n = len(data[0])
    replica, anchor = copy.deepcopy(model), copy.deepcopy(model)  # the anchor stays at w*
    params = sampled_parameters(replica)
    start = [p.detach().clone() for p in params]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # devinterp warns about nβ = 1, which a caller may mean
        sampler = SGMCMC.sgld(params, lr=settings.lr, localization=settings.localization, nbeta=settings.n_beta)
    step_sampler = unhooked_step(sampler)
    leading, own = chain_generators(chain_seed(settings.seed, chain), params[0].device)
    generator, noise = leading if lead else own
    rises, force_loc, force_data = [], 0.0, 0.0
    for step in range(-lead, settings.burn_in + settings.draws):
        if step == 0:
            generator, noise = own
        index = torch.randint(n, (settings.batch_size,), generator=generator)
        for p in params:  # what zero_grad() does, without its per-call profiler label
            p.grad = None
        batch = tuple(t[index] for t in data)
        loss = loss_fn(replica, batch)
        if not math.isfinite(float(loss.detach())):
            return {"rises": rises, "diverged_at": step + lead}
        loss.backward()
        if step >= settings.burn_in:
            with torch.no_grad():  # the same batch at w*: a control variate with the same mean as L(w*)
                rises.append(float(loss.detach() - loss_fn(anchor, batch)))
            if (step - settings.burn_in) % FORCE_EVERY == 0:
                with torch.no_grad():
                    force_loc += sum(float(((p - s) ** 2).sum()) for p, s in zip(params, start))
                    force_data += sum(float((p.grad**2).sum()) for p in params if p.grad is not None)
        try:
            step_sampler(noise_generator=noise)
        except RuntimeError as error:  # a step size past float32's range: the update itself overflows
            if "overflow" not in str(error):
                raise
            return {"rises": rises, "diverged_at": step + lead}
    # the two forces' ratio, (γ √force_loc) / (nβ √force_data), without squaring γ or nβ (nβ = 1e300 overflows)
    ratio = (
        settings.localization * math.sqrt(force_loc) / settings.n_beta / math.sqrt(force_data)
        if force_data > 0
        else None
    )
    return {"rises": rises, "diverged_at": None, "force_ratio": ratio}


def unhooked_step(sampler):
    """The sampler's ``step`` as devinterp wrote it, bound to it: torch wraps every optimizer's step in a profiler
    label and a look-up of step hooks, about a tenth of a chain's time on a model of a few parameters. The chains'
    samplers are their own and have no hooks; a hook registered for every optimizer
    (``torch.optim.optimizer.register_optimizer_step_pre_hook``) is not called for them. Where torch keeps no
    ``__wrapped__``, the step as torch wraps it."""
    step = type(sampler).step
    return functools.partial(getattr(step, "__wrapped__", step), sampler)


def chain_seed(seed: int, chain: int) -> int:
    """The sampler seed of chain ``chain`` of an estimate at ``seed``: its batches and noise, so that two
    estimates at different seeds share no chain (a result records each value's seed as ``chain_seeds``)."""
    return seed * SEEDS_PER_ESTIMATE + chain


def chain_generators(seed: int, device: torch.device) -> tuple[tuple, tuple]:
    """The (batch, noise) generators of a chain's lead and of the chain itself. devinterp
    draws the noise where the parameters are, and torch draws only from a generator of that device: on the CPU
    the batches' generator serves both (the numbers calibrated so far), elsewhere a second one."""

    def pair(seed: int) -> tuple[torch.Generator, torch.Generator]:
        batches = torch.Generator().manual_seed(seed)
        return batches, batches if device.type == "cpu" else torch.Generator(device).manual_seed(seed)

    return pair(seed + LEAD_SEED), pair(seed)
