"""What ``probe MODEL --task markov`` shows: the ICL-MC probe of a language model
(:mod:`~induction_probes.probes.lm.markov.markov_probe`), for one model or every checkpoint of a series, as a readable
table with ``figure: PATH`` lines for the figures written into ``plot``, or with ``as_json`` a JSON-ready dict.
Callable from Python:

>>> markov_lm_report("out/gpt2-markov", k=3, all_steps=True, plot="out/")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked, load_bridge
from induction_probes.circuits.interop.model_sources import (
    ModelSource,
    Series,
    find_source,
    require_model,
    require_one_model,
)
from induction_probes.circuits.limits import require_seed
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.validation import require_int
from induction_probes.probes.lm.markov.markov_measure import REFERENCES
from induction_probes.probes.lm.markov.markov_plots import plot_markov_model, plot_markov_series
from induction_probes.probes.lm.markov.markov_probe import (
    STRATEGIES,
    MarkovProbe,
    interval,
    labels,
    probe_markov_series,
    span,
)
from induction_probes.probes.lm.markov.markov_protocol import MIN_SEQ_LEN, N_SEQS, draw_count
from induction_probes.probes.report.lm_views import quiet_transformers
from induction_probes.probes.report.tables import figure_lines, format_table

if TYPE_CHECKING:
    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel

BEST_ROWS, PREVIOUS_ROWS = 8, 4  # heads a table lists: the best by bigram matching, then by previous token


def check_options(k, n_seqs, seq_len, seed, step, all_steps, id_draws=None, tokens=None) -> None:
    """Refuse bad options in one line each, before anything is booted."""
    require_int("k", k, 2)
    require_int("n_seqs", n_seqs, 2)  # one sequence has no interval
    draw_count(id_draws, tokens)  # at least one draw; tokens given: one
    require_seed("seed", seed)
    if seq_len is not None:
        require_int("seq_len", seq_len, MIN_SEQ_LEN)
    if step is not None and all_steps:
        raise BadInput("step and all_steps exclude each other: give one checkpoint or all of them")
    if step is not None:
        require_int("step", step, 0)


def checkpoints(
    model: ModelLike | Run | Series, step, all_steps: bool, device: str
) -> tuple[str, Iterable[tuple[int | None, HookedModel]], bool, int]:
    """What to probe: a name, the (step, model) pairs, booted one at a time, whether they are a series, and how
    many there are."""
    if isinstance(model, (str, os.PathLike)):
        source = find_source(os.fspath(model))
        model = Run.open(model) if source is None else source
    if isinstance(model, Run):
        steps = model.steps if all_steps else [model.steps[-1] if step is None else step]
        return model.path.name, ((s, model.load(step=s, device=device)) for s in steps), all_steps, len(steps)
    if isinstance(model, (ModelSource, Series)):
        quiet_transformers()
        if not all_steps:
            chosen = (require_model(model, step),)
        elif isinstance(model, Series):
            chosen = require_one_model(model).checkpoints
        else:
            raise BadInput(f"{model.location} is one model, not a checkpoint series: all_steps does not apply")
        name = model.name if isinstance(model, Series) else model.describe()
        return name, ((s.step, load_bridge(s, device)) for s in chosen), all_steps, len(chosen)
    if step is not None or all_steps:
        raise BadInput("a booted model is one model: step and all_steps do not apply")
    return type(model).__name__, [(None, as_hooked(model, device))], False, 1


def markov_lm_report(
    model: ModelLike | Run | Series,
    *,
    k: int = 3,
    n_seqs: int = N_SEQS,
    seq_len: int | None = None,
    seed: int = PROBE_SEED,
    tokens: list[int] | None = None,
    id_draws: int | None = None,
    step: int | None = None,
    all_steps: bool = False,
    device: str = "cpu",
    plot: str | os.PathLike | None = None,
    as_json: bool = False,
    progress: bool = True,
    threads: int | None = None,
    backend: str = "local",
    address: str | None = None,
) -> str | dict:
    """The ICL-MC probe of ``model`` (a model directory, a folder of ``step_N/`` checkpoints, a name in the local
    Hugging Face cache, a run of ours by path or name, a ``ModelSource``, ``Series`` or ``Run``, or a booted
    model: a TransformerBridge, a Hugging Face model or our HookedTransformer): one model (``step``: a series'
    checkpoint, default the last) or, with ``all_steps``, every checkpoint on the same sequences. ``k`` states
    written as ``tokens`` (one id draw) or as k ordinary ids drawn with ``seed``, ``id_draws`` times (default 4),
    each draw with its own ``n_seqs`` sequences (default 64) of ``seq_len`` tokens (default T = 100 within the
    context); the intervals cover draws and sequences. ``progress``: bars on stderr over checkpoints and sequences,
    where stderr is a terminal or a notebook's. ``threads``: torch threads (default: the policy of
    :mod:`~induction_probes.circuits.threads`). It runs here: ``backend`` "ray" and an ``address`` are refused (Ray
    spreads the repeated-token probes of a series). Bad options raise ValueError."""
    if backend != "local" or address is not None:
        raise BadInput("--backend and --address spread the repeated-token probes of a series: --task markov runs here")
    check_options(k, n_seqs, seq_len, seed, step, all_steps, id_draws, tokens)
    name, models, series, count = checkpoints(model, step, all_steps, device)
    options = {"k": k, "n_seqs": n_seqs, "seq_len": seq_len, "seed": seed, "tokens": tokens, "id_draws": id_draws}
    results = list(probe_markov_series(models, options, progress, count, threads))
    figures = write_figures(name, results, series, plot)
    if as_json:
        return report_json(name, results, series, figures)
    text = series_text(name, results) if series else model_text(name, results[0])
    return "\n".join([text, *figure_lines(figures)])


def figure_stem(name: str, step: int | None) -> str:
    stem = Path(name.split(" (")[0].split(", revision")[0]).name.replace("/", "_") or "model"
    return stem + (f"_step{step}" if step is not None else "")


def write_figures(name: str, results: list[MarkovProbe], series: bool, plot) -> list[Path]:
    if plot is None:
        return []
    if series:
        return [plot_markov_series(results, name, Path(plot) / f"{figure_stem(name, None)}_markov_steps.png")]
    result = results[0]
    title = f"{name}" + (f", step {result.step}" if result.step is not None else "")
    return [plot_markov_model(result, f"{title}: ICL-MC chains over k = {result.protocol.k} tokens",
                              Path(plot) / f"{figure_stem(name, result.step)}_markov.png")]  # fmt: skip


def report_json(name: str, results: list[MarkovProbe], series: bool, figures: list[Path]) -> dict:
    head = {"model": name, "intervals": results[0].intervals, "figures": [str(path) for path in figures]}
    if series:
        entries = [r.to_json() for r in results]
        protocol = entries[0]["protocol"]
        return head | {"steps": [r.step for r in results], "protocol": protocol, "checkpoints": entries}
    return head | results[0].to_json()


def drawn_ids(result: MarkovProbe) -> str:
    """The ids of every draw, once where every draw has the same (a vocabulary of only k ordinary tokens)."""
    protocol = result.protocol
    each = [", ".join(map(str, ids)) for ids in protocol.ids]
    if protocol.n_draws == 1:
        return f"ids {each[0]}"
    if len(set(each)) == 1:
        return f"ids {each[0]} in each of {protocol.n_draws} id draws"
    return f"{protocol.n_draws} id draws: ids " + "; ".join(each)


def protocol_line(name: str, result: MarkovProbe) -> str:
    protocol = result.protocol
    bos = f"after BOS {protocol.bos}" if protocol.bos is not None else "no BOS"
    where = name + (f", step {result.step}" if result.step is not None else "")
    per_draw = " per draw" if protocol.n_draws > 1 else ""
    return (
        f"{where}: ICL-MC chains over k = {protocol.k} tokens ({drawn_ids(result)}), {protocol.n_seqs} sequences"
        f"{per_draw} of {protocol.seq_len} tokens ({bos}), seed {protocol.seed}"
    )


def kl_table(result: MarkovProbe) -> str:
    """KL(s ‖ model) for every strategy, then the references KL(true ‖ s) the model's KL to the truth is read
    against."""
    early, late = (f"{w} ({span(getattr(result, w))[0]}-{span(getattr(result, w))[1]})" for w in ("early", "late"))
    rows = [[f"{s} || model", interval(result.kl(s, "early")), interval(result.kl(s, "late"))] for s in STRATEGIES]
    rows += [
        [f"true || {s} (reference)", interval(result.reference(s, "early")), interval(result.reference(s, "late"))]
        for s in REFERENCES
    ]
    return format_table(["KL", early, late], rows)


def shown_heads(result: MarkovProbe) -> list:
    """The best heads by bigram matching, then the best by previous token not already listed."""
    by = lambda score: sorted(result.heads, key=lambda h: -getattr(h, score).value)  # noqa: E731
    shown = dict.fromkeys(h.label for h in by("bigram_matching")[:BEST_ROWS])
    shown |= dict.fromkeys(h.label for h in by("previous_token")[:PREVIOUS_ROWS])
    return [h for h in by("bigram_matching") if h.label in shown]


def head_table(result: MarkovProbe) -> str:
    induction, previous = set(result.induction_heads), set(result.previous_token_heads)
    rows = [
        [
            h.label,
            interval(h.bigram_matching) + (" *" if (h.layer, h.head) in induction else ""),
            interval(h.bigram_matching_ideal),
            interval(h.previous_token) + (" *" if (h.layer, h.head) in previous else ""),
        ]
        for h in shown_heads(result)
    ]
    rows.append(["chance", *(f"{result.chance[s]:.3f}" for s in ("bigram_matching", "bigram_matching_ideal"))])
    rows[-1].append(f"{result.chance['previous_token']:.3f}")
    rows.append(
        ["threshold", f"{result.threshold('bigram_matching'):.3f}", "", f"{result.threshold('previous_token'):.3f}"]
    )
    return format_table(["head", "bigram matching", "(1 - TV)", "previous token"], rows)


def model_text(name: str, result: MarkovProbe) -> str:
    mass_value, _, _ = result.behaviour.curve("mass")
    lowest = int(mass_value.argmin())
    more = len(result.heads) - len(shown_heads(result))
    return "\n".join(
        [
            protocol_line(name, result),
            f"verdict: {result.verdict()}",
            "model: its next-token distribution renormalised over the k tokens; intervals " + result.intervals,
            kl_table(result),
            f"mass on the k tokens: {interval(result.mass)} (mean over positions; lowest "
            f"{mass_value[lowest].item():.3f} at position {lowest})",
            head_table(result),
            "* passes the rule: at least the threshold (halfway from chance to 1), interval above chance"
            + (f"; {more} more heads in the JSON" if more > 0 else ""),
        ]
    )


def series_text(name: str, results: list[MarkovProbe]) -> str:
    rows = []
    for r in results:
        matching, previous = r.best("bigram_matching"), r.best("previous_token")
        rows.append(
            [
                str(r.step),
                *(r.kl(s).value for s in ("unigram", "bigram", "true")),
                matching.label,
                matching.bigram_matching.value,
                previous.label,
                previous.previous_token.value,
                labels(r.induction_heads) or "none",
                "yes" if r.learns_in_context else "no",
            ]  # fmt: skip
        )
    headers = ["step", "KL unigram", "KL bigram", "KL true", "matching head", "score", "prev-token head", "score"]
    last = results[-1]
    references = ", ".join(f"KL(true || {s}) = {interval(last.reference(s))}" for s in REFERENCES)
    return "\n".join(
        [
            f"{name}: {len(results)} checkpoints; " + protocol_line(name, last).split(": ", 1)[1],
            f"KL(s || model) over the late positions {span(last.late)[0]}-{span(last.late)[1]}; best heads by score; "
            f"against {references} on the same sequences at every step; intervals {last.intervals}",
            format_table([*headers, "induction heads", "learns"], rows),
            f"verdict at step {last.step}: {last.verdict()}",
        ]
    )
