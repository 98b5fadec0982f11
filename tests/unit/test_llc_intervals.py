"""An LLC estimate never lies outside its own interval (issue 49): the interval over chains is centred on the
estimate and not clipped to [0, d/2]; where the estimate or its interval leaves that range a flag says so.
Shipped files written under the old rule (the interval alone clipped) are read through
:func:`~induction_probes.probes.llc.chain_intervals.restated`, which recomputes the interval from the stored chains.
A property test over random chains covers what the estimator's chains turn into; the rest reads every shipped
result file that holds LLC records."""

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from induction_probes.probes.llc import per_head
from induction_probes.probes.llc.chain_intervals import (
    RANGE_FLAGS,
    chain_estimate,
    chain_interval,
    range_flags,
    restated,
)
from induction_probes.probes.llc.estimator import LLCResult
from induction_probes.probes.llc.per_head import Block, block_llc
from induction_probes.probes.llc.sampling import chain_seed

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"

chain_values = st.floats(min_value=-50.0, max_value=5000.0, allow_nan=False, allow_infinity=False)
chains = st.lists(chain_values, min_size=1, max_size=12)
bounds = st.floats(min_value=0.5, max_value=2000.0, allow_nan=False)
DRAWN = {"deadline": None, "database": None, "derandomize": True}  # the same examples every run, nothing stored


def holds(record: dict) -> bool:
    low, high = record["interval"]
    return low <= record["llc"] <= high


def flagged(flags: list[str]) -> set[str]:
    return {flag.split(":")[0] for flag in flags if flag.startswith(RANGE_FLAGS)}


@settings(max_examples=300, **DRAWN)
@given(chains, bounds)
def test_chains_give_an_estimate_inside_its_interval_flagged_where_it_leaves_the_range(values, bound):
    chains_ = chain_estimate(values, bound)
    assert chains_["llc"] == sum(values) / len(values)  # the estimator's mean, to the last bit
    if len(values) < 2:
        assert chains_["interval"] is None
        low = high = chains_["llc"]
    else:
        assert holds(chains_)
        low, high = chains_["interval"]
    expected = ({"beyond d/2"} if high > bound else set()) | ({"below 0"} if low < 0 else set())
    assert flagged(chains_["range_flags"]) == expected


def clipped(values: list[float], bound: float) -> list[float] | None:
    """The interval as the old rule wrote it: clipped to [0, d/2], the estimate not."""
    interval = chain_interval(values)
    return None if interval is None else [max(interval[0], 0.0), min(interval[1], bound)]


@settings(max_examples=300, **DRAWN)
@given(st.lists(chain_values, min_size=2, max_size=12), st.integers(min_value=1, max_value=4000))
def test_a_record_written_under_the_old_rule_is_read_with_its_estimate_inside(values, n_params):
    old = {
        "llc": sum(values) / len(values),
        "n_params": n_params,
        "per_chain": values,
        "interval": clipped(values, n_params / 2),
        "flags": ["imprecise: stands"],
    }
    read = restated(old)
    assert holds(read) and read["flags"][0] == "imprecise: stands"
    assert restated(read) == read  # a record written by the current rule comes back unchanged
    low, high = read["interval"]
    assert (read["interval"] != old["interval"]) <= (low < 0 or high > n_params / 2)  # only what was clipped
    assert bool(flagged(read["flags"])) == (low < 0 or high > n_params / 2)


class Free(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(d))


def estimator_result(values: list[float], refused: bool, seed: int = 0) -> LLCResult:
    return LLCResult(
        llc=None if refused else sum(values) / len(values),
        llc_std=None,
        llc_stderr=None,
        per_chain=values,
        chain_seeds=[chain_seed(seed, c) for c in range(len(values))],
        init_loss=0.0,
        loss_rise=None,
        settings=None,
        diagnostics={},
        problems=["refused"] if refused else [],
        flags=["a flag of the estimator's"],
    )


@settings(max_examples=60, **DRAWN)
@given(chains, st.integers(min_value=1, max_value=12), st.booleans(), st.integers(min_value=1, max_value=3))
def test_every_block_record_holds_its_estimate(values, d, refused, draws):
    """:func:`block_llc`'s record around the estimator's chains (the sampling replaced by given chains), on
    one or more draws of the data, whose chains it pools."""
    draw = iter(range(draws))

    def estimated(*args, seed: int = 0, **settings) -> LLCResult:
        return estimator_result(values, refused and next(draw) == draws - 1, seed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(per_head, "estimate_llc", estimated)
        record = block_llc(Free(d), Block("w", (("w", None),)), None, (), fresh=((),) * (draws - 1))
    pooled = values * draws
    assert record["n_params"] == d and record["per_chain"] == pooled
    assert len(set(record["chain_seeds"])) == len(pooled)  # each draw samples at a seed of its own
    assert record["flags"][0].endswith("a flag of the estimator's") and len(record["problems"]) == int(refused)
    if refused or len(pooled) < 2:
        assert record["interval"] is None
    else:
        assert holds(record) and record["llc"] == sum(pooled) / len(pooled)
    mean = sum(pooled) / len(pooled)
    low, high = record["interval"] or (mean, mean)
    assert bool(flagged(record["flags"])) == (not refused and (low < 0 or high > d / 2))


def test_range_flags_say_which_side_and_whether_the_estimate_itself_left():
    assert range_flags(None, None, 1.0) == []
    assert range_flags(0.5, (0.1, 0.9), 1.0) == []
    assert range_flags(-0.2, (-0.4, 0.1), 1.0) == [
        "below 0: the estimate -0.2 [-0.4, 0.1] is below 0, which no learning coefficient is (shown as sampled, "
        "not clipped)"
    ]
    assert range_flags(1.5, None, 1.0)[0].startswith("beyond d/2: the estimate 1.5 is above d/2 = 1")


def llc_records(value, found: list[dict]) -> list[dict]:
    """Every record of a JSON value that states an LLC estimate with an interval or with its chains."""
    if isinstance(value, dict):
        estimate = value.get("llc", value.get("estimate"))
        if isinstance(estimate, (int, float)) and ("interval" in value or "per_chain" in value):
            found.append(value)
        for item in value.values():
            llc_records(item, found)
    elif isinstance(value, list):
        for item in value:
            llc_records(item, found)
    return found


def shipped_llc_records() -> dict[str, list[dict]]:
    records = {}
    for path in sorted(RESULTS.rglob("*.json")):
        found = llc_records(json.loads(path.read_text(encoding="utf-8")), [])
        if found:
            records[path.relative_to(RESULTS).as_posix()] = found
    return records


@pytest.fixture(scope="module")
def shipped() -> dict[str, list[dict]]:
    return shipped_llc_records()


def test_no_shipped_record_has_its_estimate_outside_its_interval(shipped):
    """Every shipped LLC record with an interval, as the project reads it (:func:`restated`: the current rule,
    from the stored chains), holds its estimate; one with chains and no stored interval holds it in the
    interval its chains give (its estimate is their mean), where the chains decide the estimate at all."""
    assert {"markov-k3-llc-heads/llc_heads.json", "markov-k3-llc/llc.json"} <= set(shipped)
    with_interval = 0
    for name, records in shipped.items():
        for record in records:
            estimate = record.get("llc", record.get("estimate"))
            if "interval" in record:
                read = restated(record)
                assert read["interval"] is not None, (name, record.get("block"))
                low, high = read["interval"]
                assert low <= estimate <= high, (name, record.get("step"), record.get("block"), estimate, low, high)
                with_interval += 1
            elif "llc" in record and len(record["per_chain"]) >= 2:  # the estimate is its chains' mean
                low, high = chain_interval(record["per_chain"])
                assert low <= estimate <= high, (name, record.get("step"), estimate, low, high)
    assert with_interval >= 20  # every per-head row with an estimate and every calibration block


def test_the_reader_changes_only_what_the_old_rule_clipped(shipped):
    """A stored interval differs from the one read only where the old rule clipped it at 0 or d/2; an interval
    is flagged exactly where it leaves [0, d/2] (the clipped ones among them); every stored interval that leaves
    out its estimate is a clipped one."""
    for name, records in shipped.items():
        for record in records:
            if record.get("interval") is None:
                continue
            read = restated(record)
            (low, high), (new_low, new_high) = record["interval"], read["interval"]
            bound = record["n_params"] / 2
            assert new_low == pytest.approx(low, abs=1e-12) or (low == 0.0 and new_low < 0), (name, record.get("block"))
            assert new_high == pytest.approx(high, abs=1e-12) or (high == bound and new_high > bound), name
            was_clipped = not (new_low == pytest.approx(low, abs=1e-12) and new_high == pytest.approx(high, abs=1e-12))
            leaves = new_low < 0 or new_high > bound  # the current rule flags exactly these, clipped or not
            assert bool(flagged(read["flags"])) == leaves and was_clipped <= leaves, (name, record.get("block"))
            if not low <= record["llc"] <= high:
                assert was_clipped, (name, record.get("block"))


def test_the_paper_entry_shows_each_head_inside_its_interval(monkeypatch, tmp_path):
    from induction_probes.probes.paper import beyond

    drawn = []
    monkeypatch.setattr(beyond, "plot_per_head_llc", lambda rows, *args, **kw: drawn.extend(rows) or tmp_path / "x.png")
    entry = beyond.per_head_llc_entry(tmp_path)
    assert drawn and all(holds(row) for row in drawn if row["llc"] is not None)
    assert "not clipped to [0, d/2]" in entry.ours
    for row in drawn:
        if row["llc"] is not None:
            low, high = row["interval"]
            assert f"step {row['step']}: {row['llc']:.1f} [{low:.1f}, {high:.1f}]" in entry.ours


def test_further_draws_are_sampled_at_the_first_draws_resolution(monkeypatch):
    """Chains pooled into one interval must sample one posterior: at one step (no series γ given), each draw once
    chose its own γ and step from its own curvature."""
    from induction_probes.probes.llc.calibration import linear_regression, squared_error
    from induction_probes.probes.llc.estimator import estimate_llc as real

    model, data, _ = linear_regression(2, n=200, seed=1)
    _, other, _ = linear_regression(2, n=200, seed=2)
    asked = []

    def recording(*args, **settings):
        asked.append(settings)
        return real(*args, **settings)

    monkeypatch.setattr(per_head, "estimate_llc", recording)
    record = block_llc(
        model, Block("w", (("w", None),)), squared_error, data, fresh=(other,), chains=2, localization_check=None
    )
    first = record["settings"]
    assert "localization" not in asked[0]  # the rule chose it on the first draw
    assert {k: asked[1][k] for k in ("localization", "lr", "burn_in", "draws")} == {
        k: first[k] for k in ("localization", "lr", "burn_in", "draws")
    }
    assert asked[1]["seed"] == asked[0].get("seed", 0) + 1
