"""``induction-probes report RUN --html DIR``: a run's argument on one offline page, in its order: the
phases the model passes through, the circuit the probes find forming, what ablating its heads costs, and
how close it comes to the hand-made construction. One HTML file; every figure is embedded as a PNG data
URI, so the page opens anywhere, with nothing fetched. :func:`markov_report` is the ``report`` view of an ICL-MC
run (:mod:`induction_probes.cli.views`), text or page. Imported only once ``report`` runs on such a run, so it
loads torch and matplotlib at the top."""

from __future__ import annotations

import base64
import html
import tempfile
from pathlib import Path

from induction_probes.circuits.runs.writer import write_atomic
from induction_probes.cli.common import device_of, figure_lines, json_text
from induction_probes.cli.probe import (
    ablation_text,
    plot_ablations,
    plot_probes,
    probe_text,
    probe_trajectory,
    progress_text,
)
from induction_probes.cli.report import report_json, report_text
from induction_probes.cli.verify import comparison_text, figure_steps, plot_comparison
from induction_probes.probes.compare import compare_with_prop21
from induction_probes.probes.summary import ablation_study, probe_eval_set, probe_run, single_heads

PROBE_SEQS, PROBE_SEED = 200, 12345  # enough for stable scores; the whole page takes about half a minute

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1.5em 0; } img { max-width: 100%; } figcaption { color: #666; font-size: 0.85em; }
"""


def embedded_figure(path: Path) -> str:
    """A PNG file as an <img> whose source is the file itself (a data URI), with its name as caption."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = html.escape(path.name)
    return f'<figure><img src="data:image/png;base64,{data}" alt="{name}"><figcaption>{name}</figcaption></figure>'


def section(title: str, intro: str, text: str, figures: list[Path]) -> str:
    parts = [f"<h2>{html.escape(title)}</h2>", f"<p>{html.escape(intro)}</p>"]
    parts += [f"<pre>{html.escape(text)}</pre>"] if text else []
    return "\n".join(parts + [embedded_figure(path) for path in figures])


def phases_section(run, directory: Path) -> str:
    text, figures = report_text(run, directory)
    return section(
        "1. Phases: what the model predicts over training",
        "The distance from each strategy to the model at the last token, with the strategies' own losses. "
        "Edelman et al.'s models pass from the uniform strategy to the unigram one (a plateau), then to the "
        "bigram one; the phases below say which this run passes and when.",
        text,
        figures,
    )


def probes_section(run, steps: list[int], probe_set, directory: Path, device=None) -> str:
    results = list(probe_run(run, probe_set, steps, device=device))
    progress = [r.progress for r in results if r.progress is not None]
    text = "\n\n".join(
        [probe_text(run, results[-1]), probe_trajectory(results)] + ([progress_text(run, progress)] if progress else [])
    )
    return section(
        "2. Probes: which circuit forms, and when",
        f"Attention scores and progress measures from the weights at {len(steps)} checkpoints, on "
        f"{PROBE_SEQS} fresh sequences (seed {PROBE_SEED}). Look for the order in which the pieces form: "
        "in markov-k3 layer 1 matches tokens on the plateau and layer 0's previous-token head forms only "
        "after the transition.",
        text,
        plot_probes(run, results, probe_set.inputs, directory),
    )


def ablation_section(run, probe_set, directory: Path, device=None) -> str:
    step = run.steps[-1]
    model = run.load(step=step, device=device)
    reference = probe_eval_set(run, PROBE_SEQS, PROBE_SEED + 1).inputs
    baseline, results = ablation_study(model, probe_set, single_heads(model), "zero", reference, PROBE_SEED)
    return section(
        "3. Ablations: does in-context learning need these heads?",
        "Zero-ablating each head of the final model; each bar is coloured by the strategy the ablated "
        "model is then closest to.",
        ablation_text(run, step, "zero", PROBE_SEQS, baseline, results),
        plot_ablations(run, step, baseline, results, probe_set, "zero", directory),
    )


def construction_section(run, steps: list[int], probe_set, directory: Path) -> str:
    k, c = run.task.k, 100.0
    results = {step: compare_with_prop21(run.load(step=step), probe_set.inputs, k, c) for step in steps}
    return section(
        "4. Against the construction: Edelman et al.'s Proposition 2.1",
        "The trained model's attention, positional profile, token matching and OV circuit against the "
        "hand-made two-layer circuit, over training and at the end.",
        comparison_text(run, results, k, c, PROBE_SEQS),
        plot_comparison(run, results, k, directory),
    )


def write_html_report(run, directory: Path, device=None) -> Path:
    """``directory/RUN_report.html``: every section that applies to the run (the probes, ablations and
    comparison need a two-layer attention model on bigram chains); probes and ablations run on ``device``."""
    name = run.path.name
    with tempfile.TemporaryDirectory() as scratch:
        figures = Path(scratch)
        sections = [phases_section(run, figures)]
        if run.config.get("model_class") == "HookedTransformer":
            steps = figure_steps(run)
            probe_set = probe_eval_set(run, PROBE_SEQS, PROBE_SEED)
            sections += [
                probes_section(run, steps, probe_set, figures, device),
                ablation_section(run, probe_set, figures, device),
            ]
            if run.task.n == 2:
                sections.append(construction_section(run, steps, probe_set, figures))
        else:
            sections.append(
                f"<p>{html.escape(name)} is a {html.escape(run.config.get('model_class', ''))}: "
                "it has no attention patterns to probe, ablate or compare.</p>"
            )
        page = "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en"><head><meta charset="utf-8">',
                f"<title>{html.escape(name)}: report</title><style>{STYLE}</style></head><body>",
                f"<h1>{html.escape(name)}: from phases to circuit</h1>",
                *sections,
                "</body></html>",
            ]
        )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory.resolve() / f"{name}_report.html"  # the user's folder may be a link; nothing below it is
    write_atomic(path, page.encode("utf-8"))  # a rename: a link planted at the page's name is replaced, not followed
    return path


def markov_report(run, args) -> str:
    """An ICL-MC run's report: text and figures, or JSON; with --html, the one-page report too."""
    if args.json:
        return json_text(report_json(run, args.plot))
    text, figures = report_text(run, args.plot)
    if args.html:
        text += f"\nreport: {write_html_report(run, args.html, device_of(args))}"
    return "\n".join([text] + figure_lines(figures))
