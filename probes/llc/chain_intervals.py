"""A block's learning coefficient over chains (:mod:`.per_head`): the estimate (the chains' mean), its Student-t
interval over chains, and flags where either leaves a coefficient's range [0, d/2].

The interval is centred on the estimate and never clipped: where the estimate or its interval leaves [0, d/2], a
flag says so (:func:`range_flags`: "beyond d/2", "below 0"). Files written before this rule clipped the interval
alone, so an estimate could lie outside its own interval; they store every chain's value, and :func:`restated`
recomputes their intervals and flags by this rule (readers of shipped files call it).
"""

from __future__ import annotations

import math

import torch
from scipy.stats import t as student_t

LEVEL = 0.95


def chain_interval(per_chain: list[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The Student-t interval of the mean over chains (chains are independent draws of the same estimator; with
    4 chains t = 3.18, so it is wide), centred on the estimate itself: the chains' mean taken as
    :func:`~induction_probes.probes.llc.estimator.estimate_llc` takes it, so the interval always holds its
    estimate. Not clipped to a coefficient's range [0, d/2]: :func:`range_flags` says where it leaves it
    (clipping the interval alone once left estimates above their own interval, 3.09 in [2.14, 3.00])."""
    if len(per_chain) < 2:
        return None
    values = torch.tensor(per_chain, dtype=torch.float64)
    half = float(student_t.ppf((1 + level) / 2, len(per_chain) - 1)) * float(values.std()) / math.sqrt(len(values))
    mean = sum(per_chain) / len(per_chain)  # as estimate_llc's, to the last bit: mean ± half >= 0 hold it
    return mean - half, mean + half


RANGE_FLAGS = ("beyond d/2", "below 0")  # how range_flags' flags begin


def range_flags(llc: float | None, interval: tuple[float, float] | list[float] | None, bound: float) -> list[str]:
    """Flags where an estimate or its interval leaves a coefficient's range [0, d/2] (``bound`` = d/2): both
    are reported as sampled, never clipped, and flagged instead (module docstring of :mod:`.diagnostics` for
    the estimator's own "far above", which allows the sampler's few per cent)."""
    if llc is None:
        return []
    low, high = interval if interval is not None else (llc, llc)
    shown = f"{llc:.3g} [{low:.3g}, {high:.3g}]" if interval is not None else f"{llc:.3g}"
    flags = []
    if high > bound:
        what = f"the estimate {shown} is" if llc > bound else f"the interval of {shown} reaches"
        flags.append(
            f"beyond d/2: {what} above d/2 = {bound:g}, the largest value a learning coefficient can take "
            "(shown as sampled, not clipped)"
        )
    if low < 0:
        what = f"the estimate {shown} is" if llc < 0 else f"the interval of {shown} reaches"
        flags.append(f"below 0: {what} below 0, which no learning coefficient is (shown as sampled, not clipped)")
    return flags


def chain_estimate(per_chain: list[float], bound: float, level: float = LEVEL) -> dict:
    """What a block record's chains decide: the estimate (their mean), its interval (:func:`chain_interval`)
    and the flags of :func:`range_flags`; an empty list has no estimate."""
    llc = sum(per_chain) / len(per_chain) if per_chain else None
    interval = chain_interval(per_chain, level)
    return {
        "llc": llc,
        "interval": list(interval) if interval else None,
        "dof": len(per_chain) - 1 if interval else None,
        "range_flags": range_flags(llc, interval, bound),
    }


def restated(record: dict) -> dict:
    """A stored block record (:func:`~.per_head.block_llc`) as the current rule writes it: its interval recomputed from
    its chains, unclipped, and :func:`range_flags` in its flags. Records written before that rule (the shipped
    ``markov-k3-llc-heads``, whose intervals were clipped to [0, d/2]: its calibration block ``v`` reads 3.09
    in [2.14, 3.00] as stored) keep every chain's value, so nothing is re-sampled; a record the current rule
    wrote comes back unchanged, and a refused one (no estimate) as it is. Readers of shipped files call this."""
    if record.get("llc") is None or "per_chain" not in record or "n_params" not in record:
        return record
    interval = chain_interval(record["per_chain"])
    kept = [flag for flag in record.get("flags", []) if not flag.startswith(RANGE_FLAGS)]
    return record | {
        "interval": list(interval) if interval else None,
        "flags": kept + range_flags(record["llc"], interval, record["n_params"] / 2),
    }


def difference_interval(before: list[float], after: list[float], level: float = LEVEL) -> dict | None:
    """The change of the mean over chains from ``before`` to ``after`` (independent chains: two checkpoints are
    sampled apart) and its Welch interval (Welch-Satterthwaite degrees of freedom); None with fewer than two
    chains on a side."""
    if len(before) < 2 or len(after) < 2:
        return None
    a, b = torch.tensor(before, dtype=torch.float64), torch.tensor(after, dtype=torch.float64)
    va, vb = float(a.var()) / len(a), float(b.var()) / len(b)
    change = float(b.mean() - a.mean())
    if va + vb == 0:
        return {"change": change, "interval": [change, change]}
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(student_t.ppf((1 + level) / 2, dof)) * math.sqrt(va + vb)
    return {"change": change, "interval": [change - half, change + half]}


def chain_stderr(per_chain: list[float]) -> float | None:
    """The standard error of the mean over independent chains; None with fewer than two."""
    if len(per_chain) < 2:
        return None
    return float(torch.tensor(per_chain, dtype=torch.float64).std()) / math.sqrt(len(per_chain))


def change_between(before: dict, after: dict, quarter_calibrated: bool = True) -> dict:
    """The change of a block's coefficient between two records (:func:`~.per_head.block_llc`) at the series'
    γ and at γ/4 (each record's ``quarter``), and whether it is real: the interval at γ excludes 0, and, where
    the calibration holds at γ/4 (``quarter_calibrated``), the one at γ/4 excludes it on the same side; an
    uncalibrated γ/4 is shown, but a change does not rest on it (``rests_on``). Records sampled at different
    γ are not compared without a flag (``flags``)."""
    main = difference_interval(before.get("per_chain") or [], after.get("per_chain") or [])
    quarter = difference_interval(
        (before.get("quarter") or {}).get("per_chain") or [], (after.get("quarter") or {}).get("per_chain") or []
    )
    sides = [side(d) for d in (main, quarter)]
    flags = []
    gammas = {(r.get("settings") or {}).get("localization") for r in (before, after)}
    if len(gammas) > 1:
        flags.append(f"different resolutions: γ {' and '.join(f'{g:.3g}' for g in gammas if g is not None)}")
    agrees = sides[0] == sides[1] or not quarter_calibrated
    return {
        "at_gamma": main,
        "at_quarter_gamma": quarter,
        "real": sides[0] != 0 and agrees and not flags,
        "rests_on": "γ and γ/4" if quarter_calibrated else "γ alone: γ/4 is uncalibrated at these settings",
        "flags": flags,
    }


def side(difference: dict | None) -> int:
    """+1 or -1 where the interval excludes 0 on that side, 0 where it holds 0 (or there is none)."""
    if difference is None:
        return 0
    low, high = difference["interval"]
    return 1 if low > 0 else -1 if high < 0 else 0
