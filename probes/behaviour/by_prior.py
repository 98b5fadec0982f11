"""A model's loss and KL to the truth on fresh chains of one named prior: how a mixture-trained model (Edelman et
al.'s Figure 4, 75 % doubly stochastic + 25 % unigram) does on each part of what it was trained on, or any ICL-MC
model on chains it was not trained on.

- **loss**: the mean next-token cross-entropy, in nats, over every position of ``n_seqs`` chains of the prior
  (the training loss's definition, on those chains).
- **kl**: KL(true ‖ model) at the last token, averaged over the chains (the summaries' ``final_kl``).

The chains are the prior's evaluation stream of ``seed`` (:meth:`MarkovTask.eval_set`): chain i of a prior is
the same whichever other priors are evaluated, and a mixture's evaluation set of n chains is its first
component's first round(p·n) chains followed by its second's first n − round(p·n). Every sequence has the same
length, so the mixture's loss on its own set is the weighted mean p̂·loss(first) + (1 − p̂)·loss(second) of the
losses on those chains, p̂ = round(p·n) / n.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import Run, run_task
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.prior_registry import SIMPLE_PRIORS
from induction_probes.probes.behaviour.icl_behaviour import behaviour

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

CHUNK = 100  # sequences per forward pass: the attention patterns of a chunk stay small


def prior_names(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """'doubly-stochastic,unigram' (or a list of names) → the priors to evaluate on, each checked."""
    names = tuple(name.strip() for name in text.split(",")) if isinstance(text, str) else tuple(text)
    if not names or len(set(names)) != len(names):
        raise BadInput(f"name one or more different priors, e.g. doubly-stochastic,unigram; got {text!r}")
    for name in names:
        if name not in SIMPLE_PRIORS:
            raise BadInput(f"a model is evaluated by prior on {', '.join(SIMPLE_PRIORS)}; got {name!r}")
    return names


def prior_task(task: MarkovTask, prior: str) -> MarkovTask:
    """The task's chains (states, length, order, α) drawn from ``prior``, a parameter-free prior."""
    prior_names([prior])
    return task.with_prior(prior)  # refuses a prior that does not suit the chains (doubly stochastic with n = 3)


def model_logits(model: HookedModel, inputs: Tensor, chunk: int = CHUNK) -> Float[Tensor, "batch pos k"]:
    """The model's logits on ``inputs``, ``chunk`` sequences at a time, on the CPU."""
    device = model_device(model)
    with torch.no_grad():
        parts = [model(inputs[start : start + chunk].to(device)).cpu() for start in range(0, len(inputs), chunk)]
    return torch.cat(parts)


def evaluate_on_prior(
    model: HookedModel, task: MarkovTask, prior: str, n_seqs: int = 500, seed: int = PROBE_SEED
) -> dict[str, Any]:
    """``{"prior", "n_seqs", "loss", "kl"}`` of ``model`` on ``n_seqs`` fresh chains of ``prior`` with ``task``'s
    states, length and order (module docstring)."""
    eval_set = prior_task(task, prior).eval_set(n_seqs, seed)
    result = behaviour(model_logits(model, eval_set.inputs), eval_set)
    return {"prior": prior, "n_seqs": n_seqs, "loss": result.loss, "kl": result.last_token_kl["true"]}


def evaluate_run_on_priors(
    run: Run, priors: tuple[str, ...], n_seqs: int = 500, seed: int = PROBE_SEED, step: int | None = None
) -> dict[str, dict[str, Any]]:
    """Per prior, :func:`evaluate_on_prior` of the run's checkpoint at ``step`` (default: the last)."""
    priors, task = prior_names(priors), run_task(run, MarkovTask)
    for prior in priors:  # every name checked before the checkpoint is read
        prior_task(task, prior)
    model = run.load(step=step)
    return {prior: evaluate_on_prior(model, task, prior, n_seqs, seed) for prior in priors}
