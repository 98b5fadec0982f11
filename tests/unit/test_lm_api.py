"""The language-model API as a researcher uses it: every entry point takes a path, a str or a cache name; every
result has a tidy to_frame() with its intervals; a series has first crossings with an interval over sequences;
the API and the command line share one default seed and number of sequences."""

import argparse
import inspect

import pandas as pd
import pytest
import torch
from lm_models import save_model

from induction_probes import lm
from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.probes.report.lm_markov import markov_lm_report


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    root = tmp_path_factory.mktemp("series")
    for step in (0, 50, 100):
        save_model("gpt2", root / f"step_{step}", seed=step)
    return root


def test_entry_points_take_a_path_or_a_str_and_give_the_same_numbers(series):
    model = series / "step_100"
    by_path = lm.probe(model, length=6, batch=4)
    by_str = lm.probe(str(model), length=6, batch=4)
    assert torch.equal(by_path.scores.content.value, by_str.scores.content.value)
    repeated = lm.repeated_random_tokens(lm.as_hooked(model), length=6, batch=4)
    baseline, (result,) = lm.ablate(str(model), repeated, [[(1, 0)]])
    assert result.heads == [(1, 0)] and baseline.repeated_half > 0
    half = repeated.tokens[:2, -6:].tolist()
    as_lists = lm.head_scores(str(model), [row + row for row in half])  # nested lists of ids, as a notebook writes
    assert torch.equal(
        as_lists.induction.value, lm.head_scores(model, torch.tensor([r + r for r in half])).induction.value
    )
    text = lm.probe_language_model(str(series), all_steps=True, length=6, n_seqs=4)  # raised AttributeError
    assert "3 checkpoints" in text
    assert lm.language_model_info(str(series), as_json=True)["steps"] == [0, 50, 100]
    with pytest.raises(TypeError, match="load_bridge takes a ModelSource"):  # raised AttributeError on in_cache
        lm.load_bridge(str(model))


def test_every_result_is_a_tidy_table_with_its_intervals(series):
    model = str(series / "step_50")
    step = lm.probe(model, length=6, batch=4)
    table = step.to_frame()
    content = table[(table.measure == "content") & (table.layer == 1) & (table["head"] == 0)]
    assert len(content) == 1 and content.value.item() == pytest.approx(step.scores.content.value[1, 0].item())
    assert content.low.item() == pytest.approx(step.scores.content.low[1, 0].item())
    assert set(table.measure) >= {"induction", "control", "previous_token", "copying", "positional_share", "gap"}
    assert ((table.low <= table.value + 1e-12) & (table.value <= table.high + 1e-12)).all()
    repeated = lm.repeated_random_tokens(lm.as_hooked(model), length=6, batch=4)
    _, (ablation,) = lm.ablate(model, repeated, [[(0, 1)]])
    rows = ablation.to_frame()
    rise = rows[rows.measure == "loss_increase"]
    assert rise.ablated.item() == "L0H1" and rise.layer.item() == 0 and rise["head"].item() == 1
    assert rise.value.item() == pytest.approx(ablation.increase.value)
    markov = lm.probe_markov(lm.as_hooked(model), lm.markov_draws(lm.as_hooked(model), 3, n_seqs=6, id_draws=2))
    kl = markov.to_frame()
    late = kl[kl.measure == "kl_true_late"]
    assert late.value.item() == pytest.approx(markov.kl("true").value) and late.low.item() <= late.value.item()
    assert {"true_minus_uniform_late", "bigram_matching"} <= set(kl.measure)


def test_a_series_has_first_crossings_with_an_interval_over_sequences(series):
    probes = lm.probe_series(str(series), length=6, batch=6)
    assert probes.steps == [0, 50, 100] and len(probes) == 3
    table = probes.to_frame()
    assert sorted(set(table.step)) == [0, 50, 100]
    threshold = float(table[table.measure == "previous_token"].value.median())  # some heads cross, some do not
    crossings = probes.first_crossings(threshold, scores=("previous_token",))
    assert len(crossings) == 8 and crossings.step.notna().any() and crossings.step.isna().any()
    for _, crossing in crossings.iterrows():  # recomputed from the long table, head by head
        same_head = (table.layer == crossing.layer) & (table["head"] == crossing["head"])  # .head is a method
        rows = table[(table.measure == "previous_token") & same_head].sort_values("step")
        for column, part in (("step", "value"), ("step_low", "high"), ("step_high", "low"), ("first_reached", "value")):
            above = list(rows[part] >= threshold)
            if column == "first_reached":  # the first at or above it at all
                expected = next((int(s) for s, up in zip(rows.step, above) if up), None)
            else:  # the first from which every later checkpoint stays at or above it
                expected = next((int(s) for i, s in enumerate(rows.step) if all(above[i:])), None)
            assert (None if pd.isna(crossing[column]) else int(crossing[column])) == expected, (crossing, column)
        if pd.notna(crossing.step_high):  # certain no earlier than estimated, possible no later
            assert crossing.step_low <= crossing.step <= crossing.step_high


def test_one_default_seed_and_number_of_sequences_for_the_api_and_the_command_line():
    from induction_probes.cli import build_parser

    defaults = {
        "lm.probe": inspect.signature(lm.probe).parameters,
        "lm.repeated_random_tokens": inspect.signature(lm.repeated_random_tokens).parameters,
        "probe_language_model": inspect.signature(lm.probe_language_model).parameters,
        "ablate_language_model": inspect.signature(lm.ablate_language_model).parameters,
        "markov_lm_report": inspect.signature(markov_lm_report).parameters,
    }
    for name, parameters in defaults.items():
        count = parameters.get("batch") or parameters.get("n_seqs")
        assert (count.default, parameters["seed"].default) == (LM_PROBE_SEQS, PROBE_SEED), name
    parser = build_parser(["probe"])
    args = parser.parse_args(["probe", "some-model"])
    assert args.seed == PROBE_SEED and args.n_seqs is None  # None: the API's default, by what is probed
    from induction_probes.cli.common import probe_set_size

    assert probe_set_size(argparse.Namespace(n_seqs=None), True) == LM_PROBE_SEQS


def test_a_series_probed_on_ray_gives_the_local_numbers(series, monkeypatch, local_ray):
    """One Ray task per checkpoint, on a local Ray instance bound to loopback, as the sweeps' Ray tests run."""
    monkeypatch.chdir(series.parent)  # a relative path: a worker started elsewhere once took it for a hub id
    local = lm.probe_series(series.name, length=6, batch=4)
    on_ray = lm.probe_series(series.name, backend="ray", length=6, batch=4)
    assert on_ray.steps == [0, 50, 100]
    assert [r.to_json() for r in on_ray] == [r.to_json() for r in local]  # the same numbers, to the last bit
    with pytest.raises(ValueError, match="local or ray"):
        lm.probe_series(str(series), backend="dask")


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "llama"])
def test_every_command_runs_to_the_end_on_each_family(architecture, tmp_path, capsys):
    """probe, ablate, --task markov and --all-steps over three checkpoints, on GPT-2, GPT-NeoX and Llama with
    grouped-query attention (at small width; bench/bench_lm.py runs them at GPT-2 small's size)."""
    from induction_probes.cli import main

    for step in (0, 1, 2):
        save_model(architecture, tmp_path / f"step_{step}", seed=step)
    small = ["--n-seqs", "4", "--length", "6"]
    commands = [
        ["probe", str(tmp_path), *small],
        ["probe", str(tmp_path), "--all-steps", *small],
        ["ablate", str(tmp_path), *small],
        ["probe", str(tmp_path), "--task", "markov", "--k", "3", "--n-seqs", "4", "--id-draws", "2"],
        ["probe", str(tmp_path), "--task", "markov", "--k", "3", "--n-seqs", "4", "--id-draws", "2", "--all-steps"],
    ]
    for argv in commands:
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    out = capsys.readouterr().out
    assert out.count("3 checkpoints") == 2 and "verdict" in out and "zero ablation" in out  # both --all-steps
