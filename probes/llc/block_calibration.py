"""Models whose blocks' learning coefficients are known in closed form, to calibrate the per-head estimator
(:mod:`.per_head`) at the settings each result uses: a regular block linear regression (every block's
coefficient is half its size, the blocks add up to the whole) and reduced-rank regression (its blocks do not).
Whether the estimates hold their truths is :mod:`.gate`'s to say."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from induction_probes.probes.llc.calibration import (
    at_least,
    once_per_settings,
    orthogonal_noise,
    quarter_of,
    reduced_rank_regression,
    squared_error,
)
from induction_probes.probes.llc.chain_intervals import chain_stderr
from induction_probes.probes.llc.estimator import estimate_llc
from induction_probes.probes.llc.gate import within_tolerance
from induction_probes.probes.llc.per_head import Block, block_llc


class BlockLinear(nn.Module):
    """y = Σ_h x_h · w_h + z · v: heads' weights ``w`` [head, m] stored in one tensor, as a layer's heads are,
    and one more block ``v`` [p] of its own."""

    def __init__(self, w: Tensor, v: Tensor):
        super().__init__()
        self.w = nn.Parameter(w.clone())
        self.v = nn.Parameter(v.clone())

    def forward(self, x: Tensor) -> Float[Tensor, " n"]:
        heads, m = self.w.shape
        return (x[:, : heads * m] * self.w.reshape(-1)).sum(-1) + x[:, heads * m :] @ self.v


def half_squared_error(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Float[Tensor, ""]:
    x, y = batch
    return 0.5 * ((y - model(x)) ** 2).mean()


def correlated_inputs(n: int, d: int, rho: float, generator: torch.Generator) -> Float[Tensor, "n d"]:
    """Gaussian inputs with every pair of coordinates correlated ``rho`` (so no block's Hessian is the others'
    business alone: the whole Hessian is not block-diagonal), the mean removed."""
    shared = torch.randn(n, 1, generator=generator, dtype=torch.float64)
    x = math.sqrt(rho) * shared + math.sqrt(1 - rho) * torch.randn(n, d, generator=generator, dtype=torch.float64)
    return x - x.mean(0)


def block_linear_regression(
    heads: int = 3, m: int = 4, p: int = 6, n: int = 1024, rho: float = 0.3, seed: int = 0
) -> tuple[nn.Module, tuple[Tensor, Tensor], list[Block], dict[str, float]]:
    """(model at its exact empirical minimum, data, blocks, each block's coefficient): regular, so a head's
    coefficient is m / 2, ``v``'s p / 2, and the whole model's their sum (heads · m + p) / 2. The noise is
    orthogonal to the inputs, so the point is the empirical loss's exact minimum."""
    generator = torch.Generator().manual_seed(seed)
    x = correlated_inputs(n, heads * m + p, rho, generator)
    w = torch.randn(heads, m, generator=generator, dtype=torch.float64)
    v = torch.randn(p, generator=generator, dtype=torch.float64)
    model = BlockLinear(w, v).double()
    with torch.no_grad():
        y = model(x) + orthogonal_noise(x, 1, generator)[:, 0]
    blocks = [Block(f"w{h}", (("w", h),)) for h in range(heads)] + [Block("v", (("v", None),))]
    truth = {f"w{h}": m / 2 for h in range(heads)} | {"v": p / 2, "whole": (heads * m + p) / 2}
    return model, (x, y), blocks, truth


def block_reduced_rank(
    M: int = 3, N: int = 3, H: int = 2, r: int = 1, n: int = 1024, seed: int = 0
) -> tuple[nn.Module, tuple[Tensor, Tensor], list[Block], dict[str, float]]:
    """Reduced-rank regression y = B A x at its most singular true parameter
    (:func:`~induction_probes.probes.llc.calibration.reduced_rank_regression`), blocks A and B. With B held at
    B₀ (rank r, its other columns zero), A ↦ B₀ A is linear of rank r·M: A's coefficient is r·M / 2 (the other
    rows of A are exactly flat), B's r·N / 2; the whole is Aoyagi and Watanabe's λ, not their sum."""
    model, data, whole = reduced_rank_regression(M, N, H, r, n=n, seed=seed)
    blocks = [Block("A", (("A", None),)), Block("B", (("B", None),))]
    return model, data, blocks, {"A": r * M / 2, "B": r * N / 2, "whole": whole}


# The settings measured on markov-k3 (step 606, L1H0: 77 s on one CPU thread at 512 sequences); the rule sets
# nβ, γ and the step, these replace its chains, burn-in, draws and batch.
MARKOV_K3_SETTINGS = {"chains": 4, "burn_in": 200, "draws": 200, "batch_size": 64}
MARKOV_K3_SEQS = 512


@once_per_settings
def calibrate_blocks(n: int = 1024, **settings) -> list[dict]:
    """Each calibration model's blocks (and the whole model) at ``settings``: estimate, truth, whether within
    :mod:`.gate`'s tolerance, and the blocks' sum; on ``n`` samples, or as a result on them sees it
    (:func:`~.calibration.at_least`)."""
    n, settings = at_least(n, settings)
    cases = [
        ("block linear regression", block_linear_regression(n=n), half_squared_error),
        ("reduced-rank regression M=N=3, H=2, r=1", block_reduced_rank(n=n), squared_error),
    ]
    report = []
    for name, (model, data, blocks, truth), loss_fn in cases:
        rows = [block_llc(model, block, loss_fn, data, **settings) for block in blocks]
        whole = estimate_llc(model, loss_fn, data, **settings)
        rows.append(
            {
                "block": "whole",
                "n_params": sum(p.numel() for p in model.parameters()),
                "llc": whole.llc,
                "llc_std": whole.llc_std,
                "llc_stderr": whole.llc_stderr,
                "problems": whole.problems,
                "flags": whole.flags,
                "quarter": quarter_of(whole),
            }
        )
        for row in rows:
            row["truth"] = truth[row["block"]]
            row["within"] = within_tolerance(row["llc"], row["truth"], row["llc_stderr"])
        estimates = [row["llc"] for row in rows[:-1]]
        stderrs = [row["llc_stderr"] or 0.0 for row in rows[:-1]]
        report.append(
            {
                "case": name,
                "blocks": rows,
                "sum_of_blocks": None if None in estimates else sum(estimates),
                "sum_stderr": math.sqrt(sum(e**2 for e in stderrs)),
                "sum_of_truths": sum(truth[b.name] for b in blocks),
                "whole_truth": truth["whole"],
            }
        )
    return report


def gate_cases(report: list[dict], quarter: bool = False) -> list[dict]:
    """Every block (and whole model) of :func:`calibrate_blocks`'s report as a case of :func:`.gate.gate`: its
    estimate at γ, or with ``quarter`` at γ/4 (a block's ``quarter``; a refused one is a miss)."""
    return [
        {"name": f"{case['case']}: {row['block']}", "truth": row["truth"]} | estimate_of(row, quarter)
        for case in report
        for row in case["blocks"]
    ]


def estimate_of(row: dict, quarter: bool) -> dict:
    if not quarter:
        return {"estimate": row["llc"], "stderr": row["llc_stderr"]}
    found = row.get("quarter") or {}
    chains = found.get("per_chain") or []
    estimate = found.get("llc", found.get("estimate"))  # a block's record says llc, the whole model's estimate
    return {"estimate": estimate, "stderr": chain_stderr(chains)}
