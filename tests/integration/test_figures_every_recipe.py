"""``probe --plot`` and ``report --html`` on tiny runs of every recipe at seq_len 8, 16 and 100 (issue 26:
every run shorter than the heatmap's 30 positions ended in a MaskError). Each command either writes its
figures or page (status 0) or, where it does not apply to the recipe, refuses in one line (status 2)."""

import pytest

from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe, ToyRecipe
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe, MinimalRecipe
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.toy_training import train_toy
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.cli import main

RECIPES = {
    "markov": lambda L: MarkovRecipe(
        task=MarkovTask(k=2, seq_len=L), steps=3, batch_size=4, eval_seqs=10, n_checkpoints=2
    ),
    "minimal": lambda L: MinimalRecipe(
        task=MarkovTask(k=2, seq_len=L), steps=3, batch_size=4, eval_seqs=10, n_checkpoints=2
    ),
    "gaussian": lambda L: GaussianRecipe(task=GaussianTask(seq_len=L), steps=3, batch_size=8, n_checkpoints=2),
    "toy": lambda L: ToyRecipe(seq_len=L, steps=3, n_seqs=16, log_every=1),
}
# what a command says where it does not apply to a recipe: by design, not a failure
REFUSED = {
    ("minimal", "probe"): "cannot run on it",
    ("gaussian", "report"): "HTML report follows the ICL-MC argument",
    ("toy", "probe"): "no attention heads to probe",
    ("toy", "report"): "HTML report follows the ICL-MC argument",
}


def train(kind: str, seq_len: int, path):
    if kind == "toy":
        train_toy(RECIPES[kind](seq_len), path)
    else:
        train_run(RECIPES[kind](seq_len), path, progress=False)
    return path


@pytest.mark.parametrize("seq_len", [8, 16, 100])
@pytest.mark.parametrize("kind", list(RECIPES))
def test_probe_plot_and_report_html_on_short_and_long_runs(kind, seq_len, tmp_path, capsys):
    run = train(kind, seq_len, tmp_path / f"{kind}-{seq_len}")
    for command, argv in (
        ("probe", ["probe", str(run), "--plot", str(tmp_path / "figures"), "--n-seqs", "20"]),
        ("report", ["report", str(run), "--html", str(tmp_path / "html")]),
    ):
        status = main(argv)
        err = capsys.readouterr().err
        assert "Traceback" not in err
        if (kind, command) in REFUSED:
            assert status == 2 and err.count("\n") == 1 and REFUSED[kind, command] in err, err
        else:
            assert status == 0, err
            written = tmp_path / ("figures" if command == "probe" else "html")
            assert [p for p in written.iterdir() if p.stat().st_size > 1000], f"{command} wrote nothing"


def test_a_run_name_with_dollars_makes_its_figures(tmp_path, capsys):
    run = train("markov", 8, tmp_path / "run$_$x")  # "$_$" was taken for mathtext in every title: a ValueError
    argv = ["probe", str(run), "--plot", str(tmp_path / "figures"), "--n-seqs", "20"]
    assert main(argv) == 0, capsys.readouterr().err
    assert len(list((tmp_path / "figures").glob("*.png"))) >= 2


def test_the_report_is_not_written_through_a_link_at_its_name(tmp_path, capsys):
    run = train("minimal", 8, tmp_path / "tiny")
    out, watched = tmp_path / "html", tmp_path / "watched.html"
    out.mkdir()
    watched.write_text("mine")
    (out / "tiny_report.html").symlink_to(watched)
    assert main(["report", str(run), "--html", str(out)]) == 0, capsys.readouterr().err
    assert watched.read_text() == "mine" and not (out / "tiny_report.html").is_symlink()
    assert "<html" in (out / "tiny_report.html").read_text()


def test_a_figure_is_not_written_through_a_link_at_its_name(tmp_path, capsys):
    run = train("markov", 8, tmp_path / "tiny")
    out, watched = tmp_path / "figures", tmp_path / "watched.png"
    assert main(["probe", str(run), "--plot", str(out), "--n-seqs", "20"]) == 0
    names = sorted(p.name for p in out.glob("*.png"))
    watched.write_text("mine")
    for name in names:
        (out / name).unlink()
        (out / name).symlink_to(watched)
    assert main(["probe", str(run), "--plot", str(out), "--n-seqs", "20"]) == 0, capsys.readouterr().err
    assert watched.read_text() == "mine" and not any((out / name).is_symlink() for name in names)
