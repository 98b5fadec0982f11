"""induction-probes: probe how induction heads form in small attention-only transformers.

Every name the README and the docs use, importable from here (the docs import from nowhere else, tested)::

    from induction_probes import Run, MarkovTask, MarkovRecipe, train_run, probe_model, ablation_study
    from induction_probes import phases, transition, first_crossings, align_runs, ablation_frame, estimate_llc
    from induction_probes import probe_report, run_report, html_report, run_sweep, summarize_sweep
    from induction_probes import lm  # language models (induction_probes.lm)

Each is defined in the layer it belongs to (:mod:`induction_probes.circuits` for tasks, models, recipes,
training, sweeps and run directories; :mod:`induction_probes.probes` for measurements, sweep summaries
and the report) and resolved on first use,
so ``import induction_probes`` loads neither torch nor matplotlib; the command line is
:mod:`induction_probes.cli`, the ``induction-probes`` command, which nothing here imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> the module that defines it
EXPORTS = {
    # run directories: open a shipped run or a path, load checkpoints
    "Run": "induction_probes.circuits.runs.reader",
    "CheckpointError": "induction_probes.circuits.untrusted",
    "BadInput": "induction_probes.circuits.errors",  # every bad-input error of the API is one (a ValueError)
    "limits": "induction_probes.circuits",  # the module: the sizes a stranger's files must stay within
    # tasks and the recipes that train on them
    "MarkovTask": "induction_probes.circuits.tasks.markov.markov_task",
    "GaussianTask": "induction_probes.circuits.tasks.gaussian.gaussian_task",
    "MarkovRecipe": "induction_probes.circuits.recipes.markov_recipes",
    "MinimalRecipe": "induction_probes.circuits.recipes.markov_recipes",
    "GaussianRecipe": "induction_probes.circuits.recipes.gaussian_recipes",
    "sample_markov": "induction_probes.circuits.tasks.markov.chains",
    "strategy_predictions": "induction_probes.circuits.tasks.markov.strategies",
    "train_run": "induction_probes.circuits.training.train_loop",
    # the model and the papers' constructions, loaded into it
    "HookedTransformer": "induction_probes.circuits.models.model",
    "HookedTransformerConfig": "induction_probes.circuits.models.model_config",
    "prop21": "induction_probes.circuits.constructions.edelman",
    "prop21_limit": "induction_probes.circuits.constructions.edelman",
    "wang_ih2": "induction_probes.circuits.constructions.wang",
    "wang_ihn": "induction_probes.circuits.constructions.wang",
    "load_construction": "induction_probes.circuits.constructions.loading",
    "process_weights": "induction_probes.circuits.interop.transformer_lens_io",  # LayerNorm folded, as TL does
    # probes, ablations and the comparison with Proposition 2.1
    "probe_eval_set": "induction_probes.probes.run_level.all_probes",
    "probe_model": "induction_probes.probes.run_level.checkpoint_probes",
    "probe_run": "induction_probes.probes.run_level.all_probes",
    "probe_gaussian": "induction_probes.probes.run_level.checkpoint_probes",
    "behaviour": "induction_probes.probes.behaviour.icl_behaviour",
    "ablation_study": "induction_probes.probes.ablation.ablation_study",
    "single_heads": "induction_probes.probes.ablation.head_ablation",
    "reference_inputs_for": "induction_probes.probes.ablation.head_ablation",
    "ablation_frame": "induction_probes.probes.tidy",
    "compare_with_prop21": "induction_probes.probes.comparison.trained_vs_prop21",
    "edge_effects": "induction_probes.probes.circuit.edges",  # path patching of every edge, the circuit
    "model_edges": "induction_probes.probes.circuit.path_patching",
    "evaluate_on_prior": "induction_probes.probes.behaviour.by_prior",
    "evaluate_run_on_priors": "induction_probes.probes.behaviour.by_prior",
    "estimate_llc": "induction_probes.probes.llc.estimator",
    "per_head_llc": "induction_probes.probes.llc.per_head",  # each head's (weight-refined) LLC
    # questions of a run: its phases, its transition, which head forms first, several runs side by side
    "phases": "induction_probes.probes.run_level.research_questions",
    "transition": "induction_probes.probes.run_level.research_questions",
    "first_crossings": "induction_probes.probes.run_level.research_questions",
    "align_runs": "induction_probes.probes.run_level.research_questions",
    # the report: what probe, ablate and report print (text, or a dict with as_json=True), figures, the page
    "probe_report": "induction_probes.probes.report.run_views",
    "ablation_report": "induction_probes.probes.report.run_views",
    "circuit_report": "induction_probes.probes.report.circuit_views",  # what circuit prints
    "run_report": "induction_probes.probes.report.run_views",
    "html_report": "induction_probes.probes.report.run_views",
    "write_movie": "induction_probes.probes.report.movie_run",  # what movie writes: one offline page
    "embed_bundle_in_every_view": "induction_probes.probes.views.explorer",  # notebook views, for an export
    "baselines_report": "induction_probes.probes.report.baseline_views",
    "llc_report": "induction_probes.probes.report.llc_views",
    "per_head_report": "induction_probes.probes.report.llc_heads",
    "info_report": "induction_probes.probes.report.info_views",
    "sweep_report": "induction_probes.probes.report.sweeps",  # what sweep and summarize print
    "summary_report": "induction_probes.probes.report.sweeps",
    "prop21_report": "induction_probes.probes.report.verify_views",  # what verify prints
    "prop21_comparison": "induction_probes.probes.report.verify_views",
    "wang_ih2_report": "induction_probes.probes.report.verify_views",
    "wang_ihn_report": "induction_probes.probes.report.verify_views",
    "toy_report": "induction_probes.probes.report.toy_views",  # what toy and experiment print
    "toy_sweep_report": "induction_probes.probes.report.toy_views",
    "ih4_report": "induction_probes.probes.report.toy_views",
    "write_paper": "induction_probes.probes.paper.build",  # both papers' figures, on one page
    # sweeps: train every cell of a spec (many seeds and conditions), then summarize them over seeds
    "parse_spec": "induction_probes.circuits.sweeps.sweep_spec",
    "run_sweep": "induction_probes.circuits.sweeps.sweep_runner",
    "summarize_sweep": "induction_probes.probes.sweeps.summary",
    "split_into_kinds": "induction_probes.probes.sweeps.condition_tests",
    # extension points (docs/extending.md): register a task kind, model class, probe or prior from outside
    "TASK_KINDS": "induction_probes.circuits.recipes.task_kinds",
    "TaskKind": "induction_probes.circuits.recipes.task_kinds",  # a task and its recipes
    "RecipeEntry": "induction_probes.circuits.recipes.task_kinds",
    "TaskView": "induction_probes.probes.report.view_protocols",  # what probe, ablate and report show for a task
    "ProbeSet": "induction_probes.probes.report.view_protocols",  # a view's fresh sequences
    "Output": "induction_probes.probes.report.view_protocols",  # a view's device, figure folder and JSON switch
    "register_task": "induction_probes.probes.report.task_registration",  # a task kind, its probe and view, in one call
    "unregister_task": "induction_probes.probes.report.task_registration",
    "MODEL_CLASSES": "induction_probes.circuits.models.model_classes",
    "PROBES": "induction_probes.probes.attention.probe_registry",
    "PRIORS": "induction_probes.circuits.tasks.markov.prior_registry",
    "TaskConfig": "induction_probes.circuits.tasks.task_config",
    "Recipe": "induction_probes.circuits.recipes.recipe",
    "option": "induction_probes.circuits.config",  # a config field that is a command-line option
    "nested": "induction_probes.circuits.config",  # a config field holding another config
    "GeneratorStream": "induction_probes.circuits.tasks.streams",
}

if TYPE_CHECKING:  # EXPORTS as static imports for type checkers and IDEs ("as": re-exported); a test keeps them equal
    from induction_probes.circuits import limits as limits
    from induction_probes.circuits.config import nested as nested
    from induction_probes.circuits.config import option as option
    from induction_probes.circuits.constructions.edelman import prop21 as prop21
    from induction_probes.circuits.constructions.edelman import prop21_limit as prop21_limit
    from induction_probes.circuits.constructions.loading import load_construction as load_construction
    from induction_probes.circuits.constructions.wang import wang_ih2 as wang_ih2
    from induction_probes.circuits.constructions.wang import wang_ihn as wang_ihn
    from induction_probes.circuits.errors import BadInput as BadInput
    from induction_probes.circuits.interop.transformer_lens_io import process_weights as process_weights
    from induction_probes.circuits.models.model import HookedTransformer as HookedTransformer
    from induction_probes.circuits.models.model_classes import MODEL_CLASSES as MODEL_CLASSES
    from induction_probes.circuits.models.model_config import HookedTransformerConfig as HookedTransformerConfig
    from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe as GaussianRecipe
    from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe as MarkovRecipe
    from induction_probes.circuits.recipes.markov_recipes import MinimalRecipe as MinimalRecipe
    from induction_probes.circuits.recipes.recipe import Recipe as Recipe
    from induction_probes.circuits.recipes.task_kinds import TASK_KINDS as TASK_KINDS
    from induction_probes.circuits.recipes.task_kinds import RecipeEntry as RecipeEntry
    from induction_probes.circuits.recipes.task_kinds import TaskKind as TaskKind
    from induction_probes.circuits.runs.reader import Run as Run
    from induction_probes.circuits.sweeps.sweep_runner import run_sweep as run_sweep
    from induction_probes.circuits.sweeps.sweep_spec import parse_spec as parse_spec
    from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask as GaussianTask
    from induction_probes.circuits.tasks.markov.chains import sample_markov as sample_markov
    from induction_probes.circuits.tasks.markov.markov_task import MarkovTask as MarkovTask
    from induction_probes.circuits.tasks.markov.prior_registry import PRIORS as PRIORS
    from induction_probes.circuits.tasks.markov.strategies import strategy_predictions as strategy_predictions
    from induction_probes.circuits.tasks.streams import GeneratorStream as GeneratorStream
    from induction_probes.circuits.tasks.task_config import TaskConfig as TaskConfig
    from induction_probes.circuits.training.train_loop import train_run as train_run
    from induction_probes.circuits.untrusted import CheckpointError as CheckpointError
    from induction_probes.probes.ablation.ablation_study import ablation_study as ablation_study
    from induction_probes.probes.ablation.head_ablation import reference_inputs_for as reference_inputs_for
    from induction_probes.probes.ablation.head_ablation import single_heads as single_heads
    from induction_probes.probes.attention.probe_registry import PROBES as PROBES
    from induction_probes.probes.behaviour.by_prior import evaluate_on_prior as evaluate_on_prior
    from induction_probes.probes.behaviour.by_prior import evaluate_run_on_priors as evaluate_run_on_priors
    from induction_probes.probes.behaviour.icl_behaviour import behaviour as behaviour
    from induction_probes.probes.circuit.edges import edge_effects as edge_effects
    from induction_probes.probes.circuit.path_patching import model_edges as model_edges
    from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21 as compare_with_prop21
    from induction_probes.probes.llc.estimator import estimate_llc as estimate_llc
    from induction_probes.probes.llc.per_head import per_head_llc as per_head_llc
    from induction_probes.probes.paper.build import write_paper as write_paper
    from induction_probes.probes.report.baseline_views import baselines_report as baselines_report
    from induction_probes.probes.report.circuit_views import circuit_report as circuit_report
    from induction_probes.probes.report.info_views import info_report as info_report
    from induction_probes.probes.report.llc_heads import per_head_report as per_head_report
    from induction_probes.probes.report.llc_views import llc_report as llc_report
    from induction_probes.probes.report.movie_run import write_movie as write_movie
    from induction_probes.probes.report.run_views import ablation_report as ablation_report
    from induction_probes.probes.report.run_views import html_report as html_report
    from induction_probes.probes.report.run_views import probe_report as probe_report
    from induction_probes.probes.report.run_views import run_report as run_report
    from induction_probes.probes.report.sweeps import summary_report as summary_report
    from induction_probes.probes.report.sweeps import sweep_report as sweep_report
    from induction_probes.probes.report.task_registration import register_task as register_task
    from induction_probes.probes.report.task_registration import unregister_task as unregister_task
    from induction_probes.probes.report.toy_views import ih4_report as ih4_report
    from induction_probes.probes.report.toy_views import toy_report as toy_report
    from induction_probes.probes.report.toy_views import toy_sweep_report as toy_sweep_report
    from induction_probes.probes.report.verify_views import prop21_comparison as prop21_comparison
    from induction_probes.probes.report.verify_views import prop21_report as prop21_report
    from induction_probes.probes.report.verify_views import wang_ih2_report as wang_ih2_report
    from induction_probes.probes.report.verify_views import wang_ihn_report as wang_ihn_report
    from induction_probes.probes.report.view_protocols import Output as Output
    from induction_probes.probes.report.view_protocols import ProbeSet as ProbeSet
    from induction_probes.probes.report.view_protocols import TaskView as TaskView
    from induction_probes.probes.run_level.all_probes import probe_eval_set as probe_eval_set
    from induction_probes.probes.run_level.all_probes import probe_run as probe_run
    from induction_probes.probes.run_level.checkpoint_probes import probe_gaussian as probe_gaussian
    from induction_probes.probes.run_level.checkpoint_probes import probe_model as probe_model
    from induction_probes.probes.run_level.research_questions import align_runs as align_runs
    from induction_probes.probes.run_level.research_questions import first_crossings as first_crossings
    from induction_probes.probes.run_level.research_questions import phases as phases
    from induction_probes.probes.run_level.research_questions import transition as transition
    from induction_probes.probes.sweeps.condition_tests import split_into_kinds as split_into_kinds
    from induction_probes.probes.sweeps.summary import summarize_sweep as summarize_sweep
    from induction_probes.probes.tidy import ablation_frame as ablation_frame
    from induction_probes.probes.views.explorer import embed_bundle_in_every_view as embed_bundle_in_every_view


__all__ = sorted(EXPORTS)


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module 'induction_probes' has no attribute {name!r}")
    module = importlib.import_module(EXPORTS[name])
    # a name the module defines, or one of its submodules, as `from package import module` finds it
    value = getattr(module, name) if hasattr(module, name) else importlib.import_module(f"{module.__name__}.{name}")
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(EXPORTS))
