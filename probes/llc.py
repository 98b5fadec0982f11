"""The local learning coefficient (LLC) of a checkpoint, estimated by ``devinterp``'s SGLD sampler
(Lau et al. 2023; over training, Hoogland et al. 2024, "The Developmental Landscape of In-Context
Learning").

    λ̂(w*) = nβ · (E_w[L(w)] − L(w*)),  w drawn by SGLD from ∝ exp(−nβ L(w) − γ/2 ‖w − w*‖²)

L is the next-token cross-entropy on sequences of the run's own training task (devinterp's loss on
``input_ids``; the same loss training minimises). ``devinterp`` does the sampling; this module picks
the sequences, passes the settings, and reads diagnostics from the chains' loss traces:

- ``loss_rise``: E_w[L] − L(w*), the quantity the estimate scales. It must be positive: a negative one
  means the chains found lower loss, so w* is not a local minimum at this temperature.
- ``drift``: mean loss over the last quarter of draws minus the third quarter, as a share of
  ``loss_rise``. Near 0: the chains have settled; large: more draws or a smaller step are needed.
- ``chain_spread``: the standard deviation of the per-chain estimates over their mean.

For a regular quadratic loss with r stiff directions (nβ h ≫ γ) the estimate is r/2: tested on the
unembedding bias at its optimum (three parameters, one of them flat), where it must come out near 1.
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
from dataclasses import dataclass

import torch
from torch import Tensor

from induction_probes.circuits.devices import model_device, resolve_device
from induction_probes.circuits.limits import MAX_STEPS, require_at_most


@dataclass(frozen=True)
class SamplerSettings:
    """SGLD settings, as ``devinterp.slt.llc.llc`` takes them (``n_beta`` None: batch / ln batch, its default)."""

    lr: float = 1e-4  # step size ε
    localization: float = 100.0  # γ, the pull back towards w*
    n_beta: float | None = None
    chains: int = 4
    draws: int = 200
    batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("chains", "draws", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        require_at_most("chains x draws", self.chains * self.draws, MAX_STEPS)  # each draw is an SGLD step
        if self.batch_size < 2 and self.n_beta is None:
            raise ValueError("the default n_beta = batch / ln(batch) needs a batch of at least 2")
        for name, lowest in (("lr", 0.0), ("n_beta", 0.0)):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > lowest):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not (math.isfinite(self.localization) and self.localization >= 0):
            raise ValueError(f"localization must be a finite number >= 0, got {self.localization!r}")

    @property
    def inverse_temperature(self) -> float:
        return self.n_beta if self.n_beta is not None else self.batch_size / math.log(self.batch_size)

    def to_json(self) -> dict:
        return {"lr": self.lr, "localization": self.localization, "n_beta": self.inverse_temperature,
                "chains": self.chains, "draws": self.draws, "batch_size": self.batch_size, "seed": self.seed,
                "sampler": "devinterp sgmcmc_sgld"}


@dataclass(frozen=True)
class LLCEstimate:
    step: int
    llc: float  # mean over chains
    llc_std: float  # standard deviation over chains
    per_chain: list[float]
    init_loss: float
    loss_rise: float
    drift: float | None  # None where the loss did not rise at all
    chain_spread: float | None  # None where the mean estimate is 0

    def to_json(self) -> dict:
        return dict(vars(self))


def sequences_dataset(tokens: Tensor):
    """A Hugging Face ``Dataset`` with the ``input_ids`` column devinterp reads, as torch tensors."""
    from datasets import Dataset

    return Dataset.from_dict({"input_ids": tokens.tolist()}).with_format("torch")


def estimate_llc(model, tokens: Tensor, settings: SamplerSettings, step: int = -1,
                 param_masks: dict | None = None, device=None) -> LLCEstimate:
    """The LLC of ``model`` at its current weights, sampling on ``tokens`` [n_seqs, seq_len].
    ``param_masks`` (devinterp's) restricts the sampler to some parameters. The sampler runs on
    ``device`` (default: where the model is), the model moved there first."""
    from devinterp.slt.llc import llc

    device = model_device(model) if device is None else resolve_device(device)
    model = model.to(device).train()  # devinterp differentiates the loss; no dropout in these models' defaults
    with tempfile.TemporaryDirectory(prefix="llc-") as scratch, contextlib.redirect_stderr(io.StringIO()):
        result = llc(
            model, sequences_dataset(tokens), {}, lr=settings.lr, n_beta=settings.inverse_temperature,
            localization=settings.localization, num_chains=settings.chains, num_draws=settings.draws,
            batch_size=settings.batch_size, init_seed=settings.seed, device=str(device), param_masks=param_masks,
            output_path=f"{scratch}/samples.zarr",
        )
        trace = torch.as_tensor(result.loss_trace.values, dtype=torch.float64)  # [chain, draw]
        per_chain = [float(v) for v in result.llc_per_chain.values]
        init_loss = float(result.init_loss.values)
    return summarise(step, trace, per_chain, init_loss)


def summarise(step: int, trace: Tensor, per_chain: list[float], init_loss: float) -> LLCEstimate:
    quarter = max(trace.shape[1] // 4, 1)
    rise = trace.mean().item() - init_loss
    drift = (trace[:, -quarter:].mean() - trace[:, -2 * quarter : -quarter].mean()).item()
    mean = sum(per_chain) / len(per_chain)
    std = float(torch.tensor(per_chain).std()) if len(per_chain) > 1 else 0.0
    return LLCEstimate(step=step, llc=mean, llc_std=std, per_chain=per_chain, init_loss=init_loss, loss_rise=rise,
                       drift=drift / rise if rise else None, chain_spread=std / abs(mean) if mean else None)
