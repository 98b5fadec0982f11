"""``ablate SERIES --all-steps`` (issue 62, item 5): every head at every checkpoint, one JSON row per step and head
with its interval, a long-form frame and a heatmap; each step equals ablating that checkpoint alone; a journal
folder resumes without ablating again; Ray gives the local numbers from a relative path; an ICL-MC run of ours too;
a one-step series, a file for the folder and options that do not apply are refused in one line."""

import json
import os
import shutil

import pytest
from lm_models import save_model

from induction_probes import lm
from induction_probes.cli import main
from induction_probes.probes.lm import ablate_heads
from induction_probes.probes.lm.ablate_series import ablate_series
from induction_probes.probes.lm.protocols import induction_loss

STEPS = (0, 50, 100)
SMALL = {"length": 6, "n_seqs": 6}


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    root = tmp_path_factory.mktemp("series")
    for step in STEPS:
        save_model("gpt2", root / f"step_{step}", seed=step)
    return root


def test_every_head_at_every_step_equals_each_checkpoint_ablated_alone(series, tmp_path, capsys):
    assert main(["ablate", str(series), "--all-steps", "--n-seqs", "6", "--length", "6", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["heads"]) for r in out["rows"]] == [
        (step, [f"L{layer}H{head}"]) for step in STEPS for layer in range(2) for head in range(4)
    ]
    for row in out["rows"]:
        rise = row["loss_increase"]
        assert rise["low"] <= rise["value"] <= rise["high"]
    for step in STEPS:  # each step is `ablate` of that checkpoint alone, on the same sequences
        bridge = lm.as_hooked(str(series / f"step_{step}"))
        repeated = lm.repeated_random_tokens(bridge, 6, 6)
        _, alone = lm.ablate(bridge, repeated, lm.single_heads(bridge))
        mine = [r for r in out["rows"] if r["step"] == step]
        assert [r["loss_increase"]["value"] for r in mine] == pytest.approx([a.increase.value for a in alone], abs=1e-9)
    assert [f["step"] for f in out["formation"]] == [None] * 8  # random weights: no gap to remove


def test_the_frame_is_long_form_and_a_heatmap_is_drawn(series, tmp_path):
    result = ablate_series(str(series), **SMALL)
    table = result.to_frame()
    rises = table[table.measure == "loss_increase"]
    assert len(rises) == len(STEPS) * 8 and sorted(set(rises.step)) == list(STEPS)
    first = rises[(rises.step == 50) & (rises.layer == 1) & (rises["head"] == 2)]
    assert first.value.item() == pytest.approx(result.results[1].ablations[6].increase.value)
    text = lm.ablate_language_model(str(series), all_steps=True, plot=tmp_path, progress=False, **SMALL)
    figure = tmp_path / f"{series.name}_ablation_zero_all_steps.png"
    assert f"figure: {figure}" in text and figure.stat().st_size > 10_000
    assert "(0 in)" in text  # a random model's gap: no share, the rise instead


def test_a_journal_folder_resumes_without_ablating_again(series, tmp_path, monkeypatch):
    folder = tmp_path / "journal"
    first = ablate_series(str(series), journal=folder, **SMALL)
    assert sorted(os.listdir(folder)) == [f"step_{step}.jsonl" for step in sorted(STEPS, key=str)]
    ran = []
    monkeypatch.setattr(ablate_heads, "induction_loss", lambda *a: ran.append(1) or induction_loss(*a))
    again = ablate_series(str(series), journal=folder, **SMALL)
    assert len(ran) == len(STEPS)  # the clean pass of each step only: every head is read back
    assert again.rows() == first.rows()
    (folder / "step_50.jsonl").write_text("")  # an emptied journal: that step is ablated again, the rest read
    ran.clear()
    assert ablate_series(str(series), journal=folder, **SMALL).rows() == first.rows()
    assert len(ran) == len(STEPS) + 8


def test_on_ray_from_a_relative_path_the_numbers_are_the_local_ones(series, monkeypatch, local_ray):
    monkeypatch.chdir(series.parent)  # a relative path, which a worker started elsewhere once took for a hub id
    local = ablate_series(series.name, **SMALL)
    on_ray = ablate_series(series.name, backend="ray", **SMALL)
    assert on_ray.rows() == local.rows()  # the same numbers, to the last bit (one thread on both)


def test_an_icl_mc_run_is_ablated_at_every_checkpoint(capsys):
    assert main(["ablate", "minimal-k3", "--all-steps", "--n-seqs", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    heads = {tuple(r["heads"]) for r in out["rows"]}
    assert len(out["rows"]) == len(out["steps"]) * len(heads) and len(out["steps"]) > 1
    assert all(r["loss_increase"]["low"] <= r["loss_increase"]["value"] for r in out["rows"])
    assert main(["ablate", "minimal-k3", "--all-steps", "--n-seqs", "50"]) == 0
    assert "depends on the head" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--step", "50"], "give --step or --all-steps"),
        (["--heads", "0.0"], "--heads and --screen do not apply"),
        (["--screen", "2"], "--heads and --screen do not apply"),
        (["--backend", "ray", "--threads", "2"], "a Ray task ablates its checkpoint on one"),
    ],
)
def test_options_that_do_not_apply_are_one_line(series, extra, message, capsys):
    assert main(["ablate", str(series), "--all-steps", "--n-seqs", "4", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_one_step_series_and_a_file_for_the_folder_are_refused(series, tmp_path, capsys):
    one = tmp_path / "one"
    shutil.copytree(series / "step_0", one / "step_0")
    assert main(["ablate", str(one), "--all-steps", "--n-seqs", "4"]) == 2
    assert "one checkpoint" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["ablate", str(series), "--all-steps", "--n-seqs", "4", "--out", str(tmp_path / "file")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["ablate", str(series / "step_0"), "--all-steps", "--n-seqs", "4"]) == 2
    assert "one model, not a checkpoint series" in capsys.readouterr().err
