"""The weight-refined local learning coefficient of one block of parameters: each attention head, the
embedding and the unembedding (Wang et al. 2024, "Differentiation and Specialization of Attention Heads via
the Refined Local Learning Coefficient", §2: the SGLD posterior over the block's weights, every other weight
held at w*). The estimator (:func:`~induction_probes.probes.llc.estimator.estimate_llc`) is not changed: it is
asked about a :class:`BlockView` of the model, whose only parameters are the block's entries.

**A head is a slice, not a tensor.** Our HookedTransformer stores a layer's heads in one tensor each
(``blocks.{l}.attn.W_Q`` is [head, d_model, d_head], TransformerLens's layout), so freezing tensors cannot
free one head. A gradient mask would not do either: SGLD adds its noise and localization to every entry it
samples, gradient or not. So the view holds copies of the block's slices as its own parameters and rebuilds
the model's tensors around them on every forward pass (``torch.func.functional_call``): the sampler then
moves exactly the block's entries, and the rest of the model is the frozen copy of w* (tested: the view's
gradient is the block's slice of the model's, and a sampled view changes only those entries).

**Blocks** (:func:`model_blocks`). A head ``L{l}H{h}`` is row h of its layer's W_Q, W_K, W_V, W_O, of b_Q,
b_K, b_V (with biases) and of its positional parameters (relative positions W_rel, or the ALiBi slope);
``embed`` is W_E (and W_pos with absolute positions); ``unembed`` is W_U (and b_U). The layer norms, each
layer's b_O (shared by its heads) and the MLPs belong to no block and stay at w* throughout.

**What the sum means.** For a regular model every block's coefficient is half its number of parameters, so
the blocks' coefficients add up to the whole model's (the calibration, :mod:`.block_calibration`). For a
singular model they need not: fixing the other blocks can make a block's map regular where the whole is not
(reduced-rank regression there, whose blocks sum to less than the whole).

**Intervals** over chains, never clipped and flagged where they leave [0, d/2]: :mod:`.chain_intervals`.
**Over training**, each block is sampled at one γ and step for every step compared: :mod:`.resolution`.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn
from torch.func import functional_call

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.limits import MAX_CHAINS, require_at_most
from induction_probes.circuits.names import head_label
from induction_probes.circuits.runs.reader import Run, RunOrPath, as_run
from induction_probes.circuits.validation import require_int
from induction_probes.probes.llc.chain_intervals import chain_estimate
from induction_probes.probes.llc.checkpoint_llc import next_token_loss
from induction_probes.probes.llc.estimator import LLCError, LLCSettings, estimate_llc
from induction_probes.probes.llc.resolution import sample_series

HEAD_PARAMETERS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "W_rel", "alibi_slope")  # row h of each
EMBED = ("embed.W_E", "pos_embed.W_pos")
UNEMBED = ("unembed.W_U", "unembed.b_U")


@dataclass(frozen=True)
class Block:
    """A named set of parameter entries: (parameter name, row along dim 0, or None for the whole tensor)."""

    name: str
    entries: tuple[tuple[str, int | None], ...]


def model_blocks(model: nn.Module) -> list[Block]:
    """Every head of a HookedTransformer-style model (``blocks.{l}.attn.W_Q`` [head, ...]), then ``embed``
    and ``unembed`` (module docstring); each with the parameters the model has."""
    names = dict(model.named_parameters())
    blocks = []
    for layer, block in enumerate(getattr(model, "blocks", [])):
        for head in range(block.attn.W_Q.shape[0]):
            prefix = f"blocks.{layer}.attn."
            entries = tuple((prefix + p, head) for p in HEAD_PARAMETERS if prefix + p in names)
            blocks.append(Block(head_label(layer, head), entries))
    for name, parameters in (("embed", EMBED), ("unembed", UNEMBED)):
        entries = tuple((p, None) for p in parameters if p in names)
        if entries:
            blocks.append(Block(name, entries))
    if not blocks:
        raise LLCError("the model has no attention heads, embedding or unembedding named as a HookedTransformer's")
    return blocks


class BlockView(nn.Module):
    """``model`` with only ``block``'s entries free (module docstring): its parameters that require a gradient
    are copies of those entries; the rest is a frozen copy of the model at its current weights."""

    def __init__(self, model: nn.Module, block: Block):
        super().__init__()
        self.base = copy.deepcopy(model)
        for parameter in self.base.parameters():
            parameter.requires_grad_(False)
        self.block = block
        names = dict(self.base.named_parameters())
        missing = [name for name, _ in block.entries if name not in names]
        if missing or not block.entries:
            raise LLCError(f"block {block.name}: the model has no parameters {missing or '(none given)'}")
        self.free = nn.ParameterList(
            nn.Parameter(names[name].detach().clone() if row is None else names[name][row].detach().clone())
            for name, row in block.entries
        )

    def weights(self) -> dict[str, Tensor]:
        """The model's parameters with the block's entries replaced by the free ones (differentiable in them)."""
        full: dict[str, Tensor] = dict(self.base.named_parameters())
        for (name, row), free in zip(self.block.entries, self.free):
            frozen = full[name]
            full[name] = free if row is None else torch.cat([frozen[:row], free[None], frozen[row + 1 :]])
        return full

    def forward(self, *args, **kwargs):
        return functional_call(self.base, self.weights(), args, kwargs)


def block_size(model: nn.Module, block: Block) -> int:
    names = dict(model.named_parameters())
    return sum(names[n].numel() if row is None else names[n][row].numel() for n, row in block.entries)


def block_llc(
    model: nn.Module, block: Block, loss_fn, data: tuple[Tensor, ...], *, fresh: tuple = (), **settings
) -> dict:
    """The refined LLC of one block: the estimator on its :class:`BlockView`, as a JSON-ready record, with
    ``settings.chains`` chains on ``data`` and as many on each draw in ``fresh`` (further draws of the data).
    Draw i samples at seed ``settings.seed + i``, so every chain has a sampler seed of its own
    (``chain_seeds``): the chains are independent, and the interval counts them, with its degrees of freedom.
    The estimate is the mean over all chains; its interval over them is unclipped, and flagged where it
    leaves [0, d/2] (:func:`~.chain_intervals.range_flags`); ``quarter`` is the same at γ/4 (the estimator's
    localization check, paired chain by chain)."""
    start = time.perf_counter()
    view = BlockView(model, block)
    seed = settings.get("seed", 0)
    first = estimate_llc(view, loss_fn, data, **settings)
    same = one_resolution(first)  # every draw's chains at the first draw's γ and step, or they could not be pooled
    results = [first] + [
        estimate_llc(view, loss_fn, draw, **(settings | same | {"seed": seed + i})) for i, draw in enumerate(fresh, 1)
    ]
    d = block_size(model, block)
    pooled = pooled_chains(results)
    chains = chain_estimate(pooled["per_chain"], d / 2) if pooled["llc"] is not None else None
    return pooled | {
        "block": block.name,
        "n_params": d,
        "interval": chains["interval"] if chains else None,
        "dof": chains["dof"] if chains else None,
        "interval_covers": interval_covers(len(pooled["per_chain"]), len(results)),
        "quarter": quarter_gamma(results, d),
        "flags": pooled["flags"] + (chains["range_flags"] if chains else []),
        "settings": results[0].to_json()["settings"],
        "seconds": time.perf_counter() - start,
    }


def one_resolution(result) -> dict:
    """The γ, step, burn-in and draws the estimator chose on the first draw of the data (the rule at its own
    curvature where no series resolution was given), for the further draws: chains pooled into one interval must
    be samples of one posterior, not each draw's own γ. Nothing where the first draw was refused before choosing."""
    chosen = result.settings
    if chosen is None:
        return {}
    return {"localization": chosen.localization, "lr": chosen.lr, "burn_in": chosen.burn_in, "draws": chosen.draws}


def interval_covers(chains: int, draws: int) -> str:
    """What a block's interval counts: independent chains (each its own sampler seed), nested in draws of the
    data. The draws' own spread enters only through the chains on them: with few draws it is not a unit the
    interval counts (``draw_share`` says how much of the chains' spread lies between draws)."""
    where = "one draw of the data" if draws == 1 else f"{draws} draws of the data, {chains // draws} on each"
    return f"{chains} independent chains on {where} (t with {chains - 1} degrees of freedom)"


def pooled_chains(results: list) -> dict:
    """One record from the estimator's results on several draws of the data: every chain's value and sampler
    seed, their mean (as :func:`~.chain_intervals.chain_estimate` takes it, so the interval holds it), spread
    and standard error; problems and flags of each draw, named by draw where there are several."""
    named = len(results) > 1

    def said(index: int, lines: list[str]) -> list[str]:
        return [f"data draw {index}: {line}" if named else line for line in lines]

    per_chain = [value for result in results for value in result.per_chain]
    seeds = [seed for result in results for seed in result.chain_seeds]
    if len(set(seeds)) != len(seeds):  # the chains would not be independent: an interval over them overstates
        raise LLCError(f"chains share sampler seeds {sorted({s for s in seeds if seeds.count(s) > 1})}")
    problems = [line for i, result in enumerate(results) for line in said(i, result.problems)]
    flags = [line for i, result in enumerate(results) for line in said(i, result.flags)]
    accepted = not problems and len(per_chain) > 0
    llc = sum(per_chain) / len(per_chain) if accepted else None
    std = float(torch.tensor(per_chain, dtype=torch.float64).std()) if len(per_chain) > 1 else 0.0
    diagnostics = results[0].diagnostics
    if named:
        draws = [{"llc": r.llc, "per_chain": r.per_chain, "init_loss": r.init_loss} for r in results]
        diagnostics = diagnostics | {"data_draws": draws, "draw_share": draw_share([r.per_chain for r in results])}
    return {
        "llc": llc,
        "llc_std": std if accepted else None,
        "llc_stderr": std / math.sqrt(len(per_chain)) if accepted else None,
        "per_chain": per_chain,
        "chain_seeds": seeds,
        "problems": problems,
        "flags": flags,
        "diagnostics": diagnostics,
        "init_loss": results[0].init_loss,
    }


def draw_share(groups: list[list[float]]) -> float | None:
    """The share of the chains' sum of squares that lies between draws of the data (one-way analysis of
    variance): near 0 where the draw does not matter beside the sampler; None without two chains on a draw."""
    values = [v for group in groups for v in group]
    if len(groups) < 2 or any(len(g) < 1 for g in groups) or len(values) <= len(groups):
        return None
    mean = sum(values) / len(values)
    total = sum((v - mean) ** 2 for v in values)
    between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups)
    return between / total if total > 0 else None


def quarter_gamma(results: list, d: int) -> dict | None:
    """The estimate at γ/4 from the estimator's localization check (every draw's chains, paired with the
    estimate's), its interval and range flags; None where a draw has no check (refused, or the check off)."""
    checks = [r.diagnostics.get("localization_check") for r in results]
    if not all(check and check.get("per_chain") for check in checks):
        return None
    per_chain = [value for check in checks for value in check["per_chain"]]
    found = chain_estimate(per_chain, d / 2)
    return {
        "llc": found["llc"],
        "interval": found["interval"],
        "dof": found["dof"],
        "flags": found["range_flags"],
        "n_params": d,
        "localization": checks[0]["localization"],
        "per_chain": per_chain,
        "chain_seeds": [seed for r in results for seed in r.chain_seeds],  # paired: each the estimate's chain again
    }


@dataclass(frozen=True)
class PerHeadResult:
    """One record per (step, block): ``rows`` (see :func:`block_llc`, plus ``step`` and ``sequences_seen``),
    the blocks' parameters, the settings given to the estimator (the rest by its rule) and the wall time."""

    run: str | None
    rows: list[dict[str, Any]]
    blocks: list[dict[str, Any]]
    settings: dict[str, Any]
    n_seqs: int
    seed: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """One row per (step, block): step, sequences_seen, block, n_params, llc, llc_std, low, high, the
        interval's degrees of freedom, every chain's value and its sampler seed (lists), and the problems."""
        columns = ["step", "sequences_seen", "block", "n_params", "llc", "llc_std", "low", "high", "dof"]
        columns += ["per_chain", "chain_seeds", "problems"]
        return pd.DataFrame(
            [
                {
                    **{k: r.get(k) for k in columns[:6]},
                    "low": r["interval"][0] if r["interval"] else None,
                    "high": r["interval"][1] if r["interval"] else None,
                    "dof": r.get("dof"),
                    "per_chain": r["per_chain"],
                    "chain_seeds": r.get("chain_seeds"),
                    "problems": "; ".join(r["problems"]),
                }
                for r in self.rows
            ],
            columns=columns,
        )


def per_head_llc(
    run_or_model: RunOrPath | nn.Module,
    steps: list[int] | None = None,
    *,
    tokens: Tensor | None = None,
    n_seqs: int = 1024,
    seed: int = PROBE_SEED,
    data_draws: int = 1,
    blocks: list[str] | None = None,
    device: str = "cpu",
    progress: Callable[[int | None, Block, dict[str, Any]], object] | None = None,
    **settings: float | None,
) -> PerHeadResult:
    """The refined LLC of every head, the embedding and the unembedding (or the ``blocks`` named) of an ICL-MC
    run at ``steps`` (checkpoint steps; default the last), or of a model on ``tokens`` [n_seqs, seq_len]. The
    loss is the next-token cross-entropy on ``n_seqs`` fresh sequences of ``seed``, and ``chains`` chains more
    on each of ``data_draws − 1`` further draws (seeds ``seed + 1``, ...)
    (:func:`~induction_probes.probes.llc.checkpoint_llc.next_token_loss`). ``settings`` override the estimator's rule
    (n_beta, localization, lr, burn_in, draws, chains, batch_size), the same for every block; over several
    steps, each block is sampled at one γ and step for all of them (:mod:`.resolution`).
    ``progress(step, block, record)``, if given, is called after each estimate."""
    start = time.perf_counter()
    settings = {"seed": seed} | settings
    require_int("data_draws", data_draws, 1)
    chains = settings.get("chains") or LLCSettings.__dataclass_fields__["chains"].default
    require_at_most("data_draws x chains", data_draws * int(chains), MAX_CHAINS)  # each draw runs that many
    if isinstance(run_or_model, nn.Module):
        if tokens is None or data_draws > 1:
            raise LLCError("a model needs tokens [n_seqs, seq_len] to estimate on, and one draw of them")
        models, run, seen, draws = [(None, run_or_model)], None, {}, [tokens]
    else:
        run = as_run(run_or_model)
        models, seen = run_checkpoints(run, steps, device)
        draws = [run.task.eval_set(n_seqs, seed + i).inputs for i in range(data_draws)]
    data = [(draw.to(device),) for draw in draws]
    chosen = chosen_blocks(models[0][1], blocks)
    rows = []
    for block in chosen:
        for step, record in block_series(models, block, data, settings):
            rows.append(record := {"step": step, "sequences_seen": seen.get(step)} | record)
            if progress is not None:
                progress(step, block, record)
    order = {step: i for i, (step, _) in enumerate(models)}
    rows.sort(key=lambda r: order[r["step"]])  # step by step, each step's blocks in the model's order
    described = [
        {"name": b.name, "entries": [list(e) for e in b.entries], "n_params": block_size(models[0][1], b)}
        for b in chosen
    ]
    return PerHeadResult(
        run=None if run is None else run.path.name,
        rows=rows,
        blocks=described,
        settings=settings | {"data_draws": data_draws},
        n_seqs=len(draws[0]),
        seed=seed,
        seconds=time.perf_counter() - start,
    )


def block_series(models: list, block: Block, data: list[tuple], settings: dict) -> list[tuple[int | None, dict]]:
    """[(step, record)] of one block at every checkpoint of ``models`` ([(step, model)]), sampled at the series'
    resolution (:func:`~.resolution.sample_series`), each record with it as ``resolution``."""
    views = [BlockView(model, block) for _, model in models]

    def estimate(view: BlockView, series: dict) -> dict:
        return block_llc(view.base, block, next_token_loss, data[0], fresh=tuple(data[1:]), **series)

    labels = [step for step, _ in models]
    found, resolution = sample_series(views, next_token_loss, data[0], estimate, labels=labels, **settings)
    return [(step, {"resolution": resolution} | record) for step, record in zip(labels, found)]


def run_checkpoints(run: Run, steps: list[int] | None, device: str) -> tuple[list, dict]:
    """[(step, model)] of an ICL-MC run at ``steps`` (default its last) and each step's sequences seen."""
    if run.task.name != "markov":
        raise LLCError(f"run {run.path.name} is not an ICL-MC run: the per-head LLC samples a next-token loss")
    steps = [run.steps[-1]] if steps is None else sorted(set(steps))
    if missing := sorted(set(steps) - set(run.steps)):
        raise LLCError(f"run {run.path.name} has no checkpoint at steps {missing}")
    models = [(step, run.load(step=step, device=device)) for step in steps]
    return models, {step: run.entry(step)["sequences_seen"] for step in steps}


def chosen_blocks(model: nn.Module, names: list[str] | None) -> list[Block]:
    available = model_blocks(model)
    if names is None:
        return available
    by_name = {b.name: b for b in available}
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # the same block sampled again: twice the time for a second estimate of the same thing
        raise LLCError(f"blocks names {', '.join(twice)} more than once: name each block once")
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        raise LLCError(f"unknown blocks {unknown or '(none given)'}: the model's blocks are {', '.join(by_name)}")
    return [by_name[n] for n in names]
