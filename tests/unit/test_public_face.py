"""The package's face: the names a notebook needs, from ``induction_probes`` itself, without loading torch
until one is used."""

import subprocess
import sys

import induction_probes


def test_every_exported_name_is_the_object_its_module_defines():
    import importlib

    for name, module in induction_probes.EXPORTS.items():
        assert getattr(induction_probes, name) is getattr(importlib.import_module(module), name), name
    assert set(induction_probes.__all__) == set(induction_probes.EXPORTS) <= set(dir(induction_probes))


def test_the_static_mirror_imports_exactly_the_exported_names_from_their_modules():
    # type checkers and IDEs read the TYPE_CHECKING block, the running package reads EXPORTS: they must agree
    import ast
    from pathlib import Path

    tree = ast.parse(Path(induction_probes.__file__).read_text())
    (mirror,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    imported = {}
    for statement in mirror.body:
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        for alias in statement.names:
            assert alias.asname == alias.name, f"{alias.name} is re-exported only as itself"
            imported[alias.name] = statement.module
    assert imported == induction_probes.EXPORTS


def test_the_language_model_face_says_what_it_exports_and_nothing_else_leaks():
    from induction_probes import lm

    imported = {name for name, value in vars(lm).items() if not name.startswith("_") and callable(value)}
    assert set(lm.__all__) == imported  # every name it imports is one it exports, and no other is public
    assert lm.single_heads is induction_probes.single_heads  # a shared name is the very same function
    # the three names it shares with the package's face: one function each, or a name of its own
    assert not {"probe_model", "ablation_study"} & set(lm.__all__)


def test_the_question_helpers_the_ablation_table_and_the_llc_come_from_the_top():
    from induction_probes import ablation_frame, align_runs, estimate_llc, first_crossings, limits, phases, transition
    from induction_probes.circuits import limits as deep_limits
    from induction_probes.probes import tidy
    from induction_probes.probes.llc import estimator
    from induction_probes.probes.run_level import research_questions as questions

    assert (phases, transition, first_crossings, align_runs) == (
        questions.phases,
        questions.transition,
        questions.first_crossings,
        questions.align_runs,
    )
    assert ablation_frame is tidy.ablation_frame and estimate_llc is estimator.estimate_llc
    assert limits is deep_limits  # a module is exported as `from package import module` finds it


def test_importing_the_package_loads_no_torch_and_an_unknown_name_is_an_attribute_error():
    code = (
        "import sys, induction_probes\n"
        "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules\n"
        "try:\n    induction_probes.frobnicate\nexcept AttributeError as error:\n    print(error)\n"
        "run = induction_probes.Run.open('markov-k3')\n"
        "assert 'torch' in sys.modules\nprint(run.path.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["module 'induction_probes' has no attribute 'frobnicate'", "markov-k3"]


def test_the_report_from_python_is_what_the_command_line_prints(tmp_path, capsys):
    """The report's entry points take plain arguments and return the command's text (or, with as_json, the
    dict its --json prints): the command line adds nothing but the parsing."""
    import json

    from induction_probes.cli import main

    run = induction_probes.Run.open("markov-k2")
    step = run.steps[-1]
    text = induction_probes.probe_report(run, [step], 40, 7)
    assert main(["probe", "markov-k2", "--n-seqs", "40", "--seed", "7"]) == 0
    assert capsys.readouterr().out == text + "\n"
    assert text.startswith(f"run markov-k2, step {step}: ")
    answer = induction_probes.ablation_report(run, [[(1, 0)]], n_seqs=40, seed=7, as_json=True)
    assert main(["ablate", "markov-k2", "--n-seqs", "40", "--seed", "7", "--heads", "1.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == answer and answer["ablations"][0]["heads"] == ["L1H0"]
    report = induction_probes.run_report(run, plot=tmp_path)
    assert "phases (closest strategy)" in report and (tmp_path / "markov-k2_loss.png").stat().st_size > 1000
    assert main(["report", "markov-k2"]) == 0
    assert capsys.readouterr().out.splitlines() == [line for line in report.splitlines() if "figure: " not in line]


def test_the_sweep_entry_points_are_the_sweep_layers():
    from induction_probes.circuits.sweeps import sweep_runner as sweep
    from induction_probes.probes.sweeps import summary

    assert induction_probes.run_sweep is sweep.run_sweep and induction_probes.summarize_sweep is summary.summarize_sweep
    spec = induction_probes.parse_spec('recipe = "markov"\nseeds = [0, 1]\n[base]\nk = 3\nsteps = 2\n')
    assert [cell.recipe.model_seed for cell in spec.cells()] == [0, 1]
