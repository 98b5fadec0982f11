"""Reliability round five (issue 65): each test named after what it guards, and each failed before its fix."""

import json
import os
import shutil

import pytest
from lm_models import save_model

from induction_probes.circuits.untrusted import CheckpointError, open_for_writing
from induction_probes.circuits.validation import terminal_safe
from induction_probes.cli import main

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eGPT2"  # set the title, clear the screen, C1 CSI, a bidi override


def one_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    return err


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_model("gpt2", tmp_path_factory.mktemp("lm") / "model")


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    root = tmp_path_factory.mktemp("series")
    for step in (0, 1):
        save_model("gpt2", root / f"step_{step}", seed=step)
    return root


def test_terminal_safe_escapes_every_control_character_and_keeps_lines():
    shown = terminal_safe(f"a{HOSTILE}\nb\tc")
    assert "\nb\tc" in shown and not any(ch in shown for ch in "\x1b\x07\x9b\u202e")
    assert "\\u001b]0;pwned\\u0007" in shown
    assert json.loads(f'"{terminal_safe(HOSTILE)}"') == HOSTILE  # JSON's own escapes: the JSON output still parses


def test_info_never_prints_a_control_byte_read_from_a_config(model_dir, tmp_path, capsys):
    hostile = tmp_path / "hostile"
    shutil.copytree(model_dir, hostile)
    config = json.loads((hostile / "config.json").read_text())
    config |= {"architectures": [HOSTILE], "model_type": HOSTILE * 100}
    (hostile / "config.json").write_text(json.dumps(config))
    for extra in ([], ["--json"]):
        assert main(["info", str(hostile), *extra]) == 0
        out = capsys.readouterr().out
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e") and "\\u001b" in out
        assert max(map(len, out.splitlines())) < 1000  # a name is shown to 200 characters, not 5,000


def test_a_refusal_quoting_a_name_prints_no_control_byte(capsys):
    assert main(["info", f"no-such-run{HOSTILE}"]) == 2
    err = one_line(capsys)
    assert not any(ch in err for ch in "\x1b\x07\x9b\u202e")


def test_a_hard_link_in_a_run_folder_is_never_written_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    os.link(outside, run / "lock")
    with pytest.raises(CheckpointError, match="hard link"):
        open_for_writing(run / "lock", os.O_RDWR | os.O_CREAT)
    assert outside.read_text() == "keep me"


def test_train_into_a_folder_whose_lock_is_a_hard_link_leaves_the_outside_file(tmp_path, capsys):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    os.link(outside, run / "lock")
    assert main(["train", "markov", "--k", "3", "--steps", "2", "--out", str(run)]) == 2
    assert "hard link" in one_line(capsys) and outside.read_text() == "keep me"


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--address", "not an address"], "is not a Ray address"),
        (["--address", "127.0.0.1:6379"], "give --backend ray too"),
        (["--address", "127.0.0.1:1"], "no Ray cluster answers at 127.0.0.1:1"),
    ],
)
def test_a_ray_address_is_checked_and_never_ignored(series, extra, says, capsys):
    backend = [] if "give --backend" in says else ["--backend", "ray"]
    assert main(["probe", str(series), "--all-steps", "--n-seqs", "4", *backend, *extra]) == 2
    assert says in one_line(capsys)


def test_the_markov_task_refuses_ray_rather_than_failing(series, capsys):
    assert main(["probe", str(series), "--all-steps", "--task", "markov", "--backend", "ray"]) == 2
    assert "--task markov runs here" in one_line(capsys)


def test_id_draws_are_bounded_before_any_is_drawn(model_dir, capsys):
    assert main(["probe", str(model_dir), "--task", "markov", "--id-draws", str(10**30)]) == 2
    assert "id draws x sequences" in one_line(capsys)


def test_data_draws_times_chains_are_bounded(capsys):
    assert main(["llc", "markov-k3", "--per-head", "--data-draws", str(10**9), "--steps", "4000"]) == 2
    assert "data_draws x chains" in one_line(capsys)


def test_an_overflowing_forward_pass_is_refused_with_the_head_named(model_dir, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    huge = tmp_path / "huge"
    shutil.copytree(model_dir, huge)
    weights = load_file(huge / "model.safetensors")
    save_file({k: v * 1e19 if v.is_floating_point() else v for k, v in weights.items()}, huge / "model.safetensors")
    assert main(["probe", str(huge), "--n-seqs", "4", "--length", "6", "--quiet"]) == 2
    err = one_line(capsys)
    assert "overflows" in err and "from head L0H0 on" in err and "nan" not in err
    assert main(["ablate", str(huge), "--n-seqs", "4", "--length", "6", "--quiet", "--screen", "2"]) == 2
    assert "overflows" in one_line(capsys)


def test_one_sequence_says_no_interval_instead_of_nan(model_dir, capsys):
    assert main(["probe", str(model_dir), "--n-seqs", "1", "--length", "6", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "(no interval)" in out
    assert main(["probe", str(model_dir), "--n-seqs", "1", "--length", "6", "--quiet", "--json"]) == 0
    head = json.loads(capsys.readouterr().out)["heads"][0]
    assert head["content"]["low"] is None and head["content"]["value"] == pytest.approx(head["content"]["value"])


def test_a_series_of_different_models_is_refused_by_every_series_command(series, tmp_path, capsys):  # R11
    mixed = tmp_path / "mixed"
    shutil.copytree(series / "step_0", mixed / "step_0")
    save_model("neox", mixed / "step_5")
    capsys.readouterr()  # transformers' bar while saving
    commands = [
        ["probe", str(mixed), "--all-steps", "--n-seqs", "4", "--length", "6"],
        ["ablate", str(mixed), "--all-steps", "--n-seqs", "4", "--length", "6"],
        ["movie", str(mixed), "--out", str(tmp_path / "movie")],
        ["probe", str(mixed), "--all-steps", "--task", "markov", "--n-seqs", "4", "--id-draws", "2"],
    ]
    for argv in commands:
        assert main(argv) == 2, argv
        assert "is not one model: step 5's model_type is 'gpt_neox', step 0's 'gpt2'" in one_line(capsys)


def test_movie_never_replaces_a_page_it_did_not_write(tmp_path, capsys):  # R6
    page = tmp_path / "movie.html"
    page.write_text("<html>someone's notes</html>")
    assert main(["movie", "markov-k3", "--out", str(tmp_path), "--frames", "2"]) == 2
    assert "is not a movie this command wrote" in one_line(capsys)
    assert page.read_text() == "<html>someone's notes</html>"
    page.unlink()
    for _ in range(2):  # its own page it replaces
        assert main(["movie", "markov-k3", "--out", str(tmp_path), "--frames", "2"]) == 0
        capsys.readouterr()


def test_a_head_named_twice_is_refused(tmp_path, capsys):  # R12
    assert main(["movie", "markov-k3", "--out", str(tmp_path / "movie"), "--heads", "L0H0,L0H0"]) == 2
    assert "L0H0 named twice" in one_line(capsys)


def test_text_with_all_steps_is_refused_not_ignored(series, capsys):  # R13
    assert main(["probe", str(series), "--all-steps", "--text", "README.md"]) == 2
    assert "--text scores one model's text" in one_line(capsys)


def test_a_huge_length_is_quoted_short(model_dir, capsys):  # R16
    assert main(["probe", str(model_dir), "--length", "9" * 5000]) == 2
    err = one_line(capsys)
    assert len(err) < 400 and "characters)" in err


def test_a_live_process_in_the_lock_is_not_called_a_killed_trainer(tmp_path, capsys):  # R14
    run = tmp_path / "run"
    run.mkdir()
    (run / "lock").write_text("1\n")  # init: alive, and never a trainer of this run
    assert main(["train", "markov", "--k", "3", "--steps", "2", "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert "process 1, which holds no lock on it" in err and "was killed" not in err


def test_a_folder_named_like_a_temporary_file_is_refused_not_crashed_on(tmp_path, capsys):  # R15
    run = tmp_path / "run"
    assert main(["train", "markov", "--k", "3", "--steps", "2", "--out", str(run)]) == 0
    capsys.readouterr()
    (run / ".config.json.abc.tmp").mkdir()
    assert main(["train", "markov", "--out", str(run), "--resume"]) == 2
    assert "a folder named like a temporary file" in one_line(capsys)


@pytest.mark.parametrize("tamper", ["drop the last line", "a field of the wrong type"])
def test_a_tampered_metrics_file_is_one_line_for_movie_and_llc(tamper, tmp_path, capsys):  # R5
    from induction_probes.circuits.runs.shipped import resolve_run

    run = tmp_path / "run"
    shutil.copytree(resolve_run("markov-k3"), run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    if tamper == "drop the last line":
        lines = lines[:-1]
    else:
        last = json.loads(lines[-1])
        lines[-1] = json.dumps(last | {"last_token_kl": "oops"})
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    for argv in (["movie", str(run), "--out", str(tmp_path / "movie"), "--frames", "2"], ["llc", str(run)]):
        assert main(argv) == 2
        assert "metrics.jsonl" in one_line(capsys)


@pytest.mark.parametrize(
    "change, says",
    [
        ({"n_layer": -1}, "n_layer"),
        ({"n_layer": 0}, "n_layer"),
        ({"n_layer": 100_000}, "n_layer"),
        ({"auto_map": {"AutoModel": "x.Y"}}, "auto_map"),
        ({"quantization_config": {}}, "quantization_config"),
        ({"architectures": "GPT2LMHeadModel"}, "architectures must be a list"),
    ],
)
def test_info_refuses_what_the_loader_refuses(model_dir, tmp_path, change, says, capsys):  # R3
    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    config = json.loads((folder / "config.json").read_text()) | change
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["info", str(folder)]) == 2
    assert says in one_line(capsys)


def test_info_refuses_headers_and_token_ids_it_cannot_trust(model_dir, tmp_path, capsys):  # R1, R18
    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    for entry, says in (
        (5, "has no dtype and shape"),
        ({"dtype": "F32", "shape": [10**30], "data_offsets": [0, 0]}, "no size"),
    ):
        name = next(k for k in header if k != "__metadata__")
        text = json.dumps(header | {name: entry}).encode()
        weights.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + length :])
        assert main(["info", str(folder)]) == 2
        assert says in one_line(capsys)
    weights.write_bytes(data)
    tokenizer = {"model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer | {"added_tokens": [{"id": 10**30, "content": "x"}]}))
    assert main(["info", str(folder)]) == 2
    assert "outside 0.." in one_line(capsys)


def test_movie_of_a_series_writes_no_loading_bar_to_a_log(series, tmp_path):  # R17
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [
            Path(sys.executable).with_name("induction-probes"),
            "movie",
            str(series),
            "--out",
            str(tmp_path),
            "--frames",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.startswith("movie: ")
    assert done.stderr == ""  # a log, not a terminal: no transformers bar or config warning


def test_a_builtin_registered_lazily_as_a_prior_is_never_called():
    from induction_probes.circuits.registry import UnusableEntry
    from induction_probes.circuits.tasks.markov.prior_registry import PRIORS

    PRIORS.register("os-system", "os:system")
    try:
        with pytest.raises(UnusableEntry, match="builtin"):
            PRIORS.get("os-system")
    finally:
        PRIORS.unregister("os-system")


def test_the_paper_on_a_result_that_lacks_a_field_is_one_line(tmp_path, monkeypatch):  # R19
    from induction_probes.circuits.errors import BadInput
    from induction_probes.probes.paper import shipped_files
    from induction_probes.probes.paper.beyond import llc_entry
    from induction_probes.probes.paper.build import built

    results = tmp_path / "results"
    shutil.copytree(shipped_files.RESULTS / "markov-k3-llc", results / "markov-k3-llc")
    llc = results / "markov-k3-llc" / "llc.json"
    answer = json.loads(llc.read_text())
    del answer["checkpoints"][0]["llc"]
    llc.write_text(json.dumps(answer))
    monkeypatch.setattr(shipped_files, "RESULTS", results)
    with pytest.raises(BadInput, match="does not hold what the page's llc_entry reads"):
        built(llc_entry, tmp_path / "figures")


def test_a_size_left_out_and_a_size_given_as_null_read_alike(series, tmp_path, capsys):  # review of R11
    mixed = tmp_path / "mixed"
    for step, extra in ((0, {}), (5, {"num_key_value_heads": None})):
        shutil.copytree(series / "step_0", mixed / f"step_{step}")
        config = json.loads((mixed / f"step_{step}" / "config.json").read_text()) | extra
        (mixed / f"step_{step}" / "config.json").write_text(json.dumps(config))
    from induction_probes.circuits.interop.model_sources import require_one_model, require_series

    assert require_one_model(require_series(str(mixed))).steps == [0, 5]  # it crashed with StopIteration


def test_an_infinite_evaluation_is_refused(tmp_path):  # review of R5: 1e999 parses to infinity
    from pathlib import Path

    from induction_probes.circuits.runs.reader import check_metrics
    from induction_probes.circuits.untrusted import CheckpointError

    with pytest.raises(CheckpointError, match="eval_loss is not a number"):
        check_metrics([json.loads('{"step": 0, "eval_loss": 1e999}')], [0], Path("metrics.jsonl"))


def test_ray_with_a_gpu_device_is_refused_before_ray_starts(series):
    """Ray tasks here ask for one CPU and no GPU: some Ray versions hide the GPUs from such a task."""
    from induction_probes.circuits.errors import BadInput
    from induction_probes.circuits.interop.model_sources import require_series
    from induction_probes.probes.lm.ray_series import on_ray

    with pytest.raises(BadInput, match="without --backend ray"):
        on_ray(require_series(str(series)), print, None, None, "cuda", {})


def test_a_sweep_figure_is_titled_by_what_it_plots(tmp_path, monkeypatch):  # what people met
    from induction_probes.probes.figures import plots, plots_sweep
    from induction_probes.probes.paper.shipped_files import summary

    titles = []
    real_save = plots.save
    monkeypatch.setattr(
        plots, "save", lambda fig, path: titles.extend(a.get_title() for a in fig.axes) or real_save(fig, path)
    )
    plots_sweep.plot_sweep_summary(summary("seed-variance"), tmp_path)
    assert titles and not any("test loss" in t for t in titles)
    assert any("KL(true ‖ model) at the last token" in t for t in titles)


def test_ablate_help_shows_both_head_formats(capsys):  # what people met
    with pytest.raises(SystemExit):
        main(["ablate", "--help"])
    assert "L.H,L.H or L0H0,L1H0" in " ".join(capsys.readouterr().out.split())  # however argparse wraps it
