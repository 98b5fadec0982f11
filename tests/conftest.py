import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

# The CLI's default, measured in bench/bench_model.py: one thread is faster for these tiny models on
# the 2-core machine, and two threads contend badly whenever anything else runs.
torch.set_num_threads(1)

# Ray starts its workers at nice 15, where the suite's other processes (at nice 0) starved them: under load the
# Ray cluster test's workers had a CPU-second each in their first minute, and its wait for a first cell timed out.
# At 0 they share the machine as the local pool's workers do. Every Ray instance of the suite is started below
# this process (a test's own cluster, or a sweep's local one), so all of them inherit it.
os.environ["RAY_worker_niceness"] = "0"

ROOT = Path(__file__).parents[1]  # the repository, as pytest names the test files

# Tests that read files made on another machine (the shipped runs in checkpoints/, the shipped results in
# experiments/results/) must hold on any CPU: they compare within float32 rounding or check decisions with a
# stated margin. They carry the `shipped` mark so that tests/across_kernels.sh can run them under another
# CPU's kernels. A module is marked whole when its source names a shipped run or result.
SHIPPED = re.compile(r"markov-k[23]|minimal-k3|gaussian-ih2|experiments/results|\"results\"")


def every_file(root: Path) -> dict[str, bytes]:
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}


@pytest.fixture
def local_ray(monkeypatch):
    """The environment of a local Ray instance for one test: its files in a short folder of the test's own (Ray's
    socket paths are limited in length), found by no other test, and no cluster address; removed after."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    folder = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    monkeypatch.setenv("RAY_ADDRESS", "")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def trained_once(tmp_path_factory):
    """``trained_once(recipe)``: the run of ``recipe``, trained once per session (per xdist worker) for the tests
    that only read it: a dozen tests compare with the same tiny run, and each trained it anew. Call it from a
    fixture, so that the training happens before a test patches anything. A test that wrote into the run would
    change what the others read: at the end its files must still be the bytes it was trained with."""
    # imported here, not at the top: xdist's controller loads this file too, and runs no test (TransformerLens, 2.5 s)
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.circuits.training.train_loop import train_run

    runs: dict = {}

    def run_of(recipe) -> Run:
        if recipe not in runs:
            path = tmp_path_factory.mktemp("trained-once") / "run"
            train_run(recipe, path, progress=False)
            runs[recipe] = (path, every_file(path))
        return Run.open(runs[recipe][0])

    yield run_of
    for path, files in runs.values():
        assert every_file(path) == files, f"a test wrote into the shared run {path}"


@functools.cache
def source(path: Path) -> str:
    """A test file's text, read once: the shipped mark, the slow tier's collection and its guard all read it."""
    return path.read_text()


@functools.cache
def reads_shipped(path: Path) -> bool:
    return bool(SHIPPED.search(source(path)))


def pytest_collection_modifyitems(items):
    for item in items:
        path = Path(item.fspath)
        if reads_shipped(path):
            item.add_marker(pytest.mark.shipped)
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") and not may_hold_slow_tests(path):
            raise pytest.UsageError(
                f"{item.nodeid} is slow, but the slow tier would not collect its file: mark it with "
                "`pytest.mark.slow` in its file's text or name it in tests/conftest.py's SLOW"
            )


def pytest_ignore_collect(collection_path: Path, config):
    """The slow tier (``-m slow``) collects only the files that can hold its tests: each of its workers imported
    every test file to run 45 tests (17 CPU-s; the 20 files that can hold them, 7). Every collection checks that no
    slow test lies elsewhere (above), so the fast tier, which collects every file, fails before one is lost."""
    if config.getoption("markexpr") == "slow" and is_test_file(collection_path):
        if not may_hold_slow_tests(collection_path):
            return True
    return None  # pytest's own rules decide


def is_test_file(path: Path) -> bool:
    return path.suffix == ".py" and path.name.startswith("test_") and path.is_file()


def may_hold_slow_tests(path: Path) -> bool:
    """Whether a test file can hold a slow test, read without importing it: SLOW names it, or its text marks one."""
    named = path.is_relative_to(ROOT) and path.relative_to(ROOT).as_posix() in SLOW
    return named or "mark.slow" in source(path)


# The slow tier: `make test-fast` leaves it out so that a fix loop takes minutes, and `make test` (which CI runs)
# runs it after the fast tier, so that nothing goes untested. A test belongs here when it costs tens of seconds
# and checks machinery that few changes touch: the LLC estimator's accuracy (chains at the calibrated settings) and
# its commands end to end and its settings fuzzed, Ray clusters, fault injection (training, sweeps, workers and
# drivers killed mid-way or their files damaged, modules planted beside them, two sweeps racing on a folder), the
# toy's phase timing, the wheel built and installed, the tutorial notebook executed, the GPU pass's own commands,
# a sweep on a named device, and the paper page redrawn whole. Since issue 66 also the tests of several seconds
# each that run commands in child processes or whole pipelines end to end (the command-line fuzzing, a plugin
# seen from a shell, the HTML report and every recipe's figures, language-model series, the browser views,
# a large model's threads), so that the fast tier stays under two minutes; their parts have fast tests of their own.
# Listed here for the files whose tests were there before the tiers, so that their files stay as they were; a new
# test may carry `@pytest.mark.slow` itself. tests/unit/test_tiers.py checks that every name here is still a test.
SLOW = {
    "tests/integration/test_ray_cluster.py": ["*"],
    "tests/integration/test_paper.py": [  # the page's figures, every experiment redrawn (about a minute)
        "test_the_command_writes_the_page_and_says_where",
        "test_every_figure_is_a_decodable_image",
        "test_the_page_references_only_files_beside_it",
        "test_every_claim_has_a_verdict_and_the_missing_ones_an_issue",
        "test_chromium_loads_every_image_and_fetches_nothing_else",
    ],
    "tests/integration/test_training.py": [
        "test_ctrl_c_saves_the_step_it_reached_and_resume_finishes_byte_for_byte",
        "test_killed_at_any_write_point_of_the_first_or_a_later_checkpoint_resume_finishes_byte_for_byte",
    ],
    "tests/integration/test_run_lock.py": ["test_a_killed_trainers_lock_is_taken_over_and_said_so"],
    "tests/integration/test_worker_safety.py": [
        "test_a_killed_drivers_worker_stops_and_the_rerun_resumes",
        "test_sweep_and_summarize_import_nothing_from_the_current_folder",
        "test_plugins_beside_you_and_installed_ones_reach_the_workers",  # a sweep through the command (10 s)
        "test_workers_start_with_torch_loaded_and_the_environment_of_their_pool",  # issue 66 (6 s)
    ],
    "tests/integration/test_shipped_runs.py": [
        "test_the_wheel_installs_one_name_beside_other_projects_circuits_and_probes"
    ],
    "tests/unit/test_llc.py": [  # the llc command end to end on markov-k3 (its Hessians take most of the time)
        "test_llc_command_reports_settings_calibration_diagnostics_and_the_construction",
        "test_llc_per_head_command_answers_each_block_with_its_calibration_and_figure",
    ],
    "tests/unit/test_lm_api.py": ["test_a_series_probed_on_ray_gives_the_local_numbers"],
    "tests/unit/test_toy.py": ["test_plateau_grows_with_length_and_with_log_one_over_sigma"],
    "tests/unit/test_tutorial.py": ["test_the_notebook_runs_and_draws_its_figures"],
    "tests/unit/test_gpu_check.py": ["test_a_command_that_fails_on_the_device_is_named_with_its_status_and_last_line"],
    "tests/integration/test_devices.py": ["test_a_sweep_on_the_cpu_device_writes_the_same_runs_as_one_without"],
    "tests/integration/test_sweep.py": [
        "test_a_sweep_killed_mid_way_finishes_with_the_files_of_an_uninterrupted_one",
        "test_the_ray_backend_listens_on_loopback_only_and_writes_the_same_run_directories_as_the_local_pool",
    ],
    "tests/integration/test_toy_sweep.py": ["*"],  # a sweep of toy models trained first (13 s), then its summary
    "tests/integration/test_sweep_hostile.py": [
        "test_a_sweep_says_where_its_cells_are_while_none_finishes",  # waits for heartbeats
        "test_a_killed_worker_fails_at_most_its_own_cell",
        "test_a_finished_cell_damaged_since_is_reported_never_skipped",
    ],
    "tests/integration/test_sweep_concurrency.py": ["test_two_sweeps_and_a_summary_at_once_on_one_folder"],
    "tests/unit/test_llc_estimator.py": [
        "test_default_estimate_is_within_20_percent_of_the_known_coefficient",
        "test_beyond_the_calibration_an_estimate_is_within_20_percent_or_flagged",
        "test_an_ill_conditioned_model_is_flagged_by_the_localization_check",
    ],
    "tests/unit/test_llc_per_head.py": ["test_every_block_is_within_tolerance_at_the_settings_for_markov_k3"],
    # issue 49's acceptance run: the per-head calibration cases sampled beside two checkpoints
    "tests/unit/test_llc_resolution.py": [
        "test_per_head_over_steps_one_gamma_quarter_beside_and_a_failing_calibration_marked"
    ],
    # issue 66: end to end, several seconds each (fast-tier seconds measured 2026-12-07 in brackets)
    "tests/unit/test_cli_fuzz.py": [
        "test_no_llc_settings_make_a_traceback_or_print_a_diverged_chain",
        "test_no_arguments_make_a_traceback_or_an_unknown_status",  # (12 s)
        "test_no_spec_makes_a_traceback",  # (3 s)
        "test_no_tampered_sweep_makes_a_traceback_or_a_number_that_is_not_one",  # (2 s)
    ],
    "tests/unit/test_lm_ablate_series.py": ["test_on_ray_from_a_relative_path_the_numbers_are_the_local_ones"],  # (11)
    "tests/integration/test_extending.py": [
        "test_a_shell_command_sees_the_modules_named_in_the_plugins_variable",  # (10 s)
        "test_a_task_and_a_probe_from_outside_train_probe_sweep_and_report",  # (7 s; test_registry is the fast one)
    ],
    "tests/unit/test_figures.py": ["test_the_html_report_is_one_offline_page_with_every_figure_embedded"],  # (9 s)
    "tests/integration/test_figures_every_recipe.py": ["test_probe_plot_and_report_html_on_short_and_long_runs"],  # 9
    "tests/unit/test_circuit_lm.py": ["test_a_series_has_edge_rows_at_every_step_and_the_key_edge_a_formation_bracket"],
    "tests/unit/test_lm_progress.py": ["test_ablate_shows_which_head_and_the_time_left_and_keeps_the_json_clean"],
    "tests/unit/test_reliability_five.py": ["test_movie_of_a_series_writes_no_loading_bar_to_a_log"],  # (6 s)
    "tests/unit/test_threads.py": ["test_the_command_line_keeps_torchs_own_count_for_a_large_model"],  # (5 s)
    "tests/unit/test_cli.py": ["test_a_bare_command_shows_its_usage_and_a_closed_pipe_is_no_traceback"],  # (5 s)
    "tests/integration/test_curriculum_runs.py": [
        "test_summarize_by_prior_adds_each_seed_s_losses_per_prior_and_their_paired_comparisons"  # (5 s)
    ],
    "tests/unit/test_types.py": ["test_every_exported_name_is_known_to_pyright"],  # (4 s; the whole package's is here)
    "tests/integration/test_views_browser.py": ["*"],  # chromium driving every view (10 s)
}


def is_slow(item) -> bool:
    names = SLOW.get(Path(item.fspath).relative_to(ROOT).as_posix(), [])
    return "*" in names or item.originalname in names
