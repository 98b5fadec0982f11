"""``probe``, ``ablate`` and ``info`` on a Hugging Face language model (a model directory, a directory of
``step_N/`` checkpoints, or a name in the local Hugging Face cache) instead of one of our runs.

:func:`language_model` is the one place that tells the two apart; the run commands call it first and hand
a language model over to the handlers here. Nothing is downloaded: the environment is set offline for
Hugging Face before anything of theirs is imported, and every load is ``local_files_only``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from induction_probes.cli.common import figure_lines, format_table, json_text, path

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).

DEFAULT_LENGTH = 50  # tokens of R in [BOS] + R + R (as in TransformerLens's and ARENA's induction demos)
PROBE_THRESHOLD, ABLATE_THRESHOLD = 0.4, 0.5
MAX_TEXT = 1 << 24  # bytes of a --text file read (16 MiB: far more than the windows need)
TABLE_ROWS = 12  # heads listed in a table (all of them are in --json)


def add_options(parser: argparse.ArgumentParser, ablate: bool = False) -> None:
    """The options only a language model reads. Their defaults are filled in by :func:`language_model`, so
    that one given for a run of ours is refused instead of ignored."""
    group = parser.add_argument_group("language models (a Hugging Face model directory or cache name)")
    group.add_argument(
        "--length",
        type=int,
        help=f"tokens of R in the repeated random sequences [BOS] + R + R (default {DEFAULT_LENGTH})",
    )
    default = ABLATE_THRESHOLD if ablate else PROBE_THRESHOLD
    what = "share of the induction gap an ablation removes" if ablate else "attention score"
    group.add_argument("--threshold", type=float, help=f"mark heads whose {what} reaches this (default {default})")
    parser.set_defaults(lm_threshold=default)
    if not ablate:
        group.add_argument(
            "--text",
            type=path,
            metavar="FILE",
            help="also the ICL score on this UTF-8 text: loss at token 500 minus token 50 (Olsson et al.)",
        )


LM_OPTIONS = ("length", "threshold", "text")


def language_model(args: argparse.Namespace):
    """The language model (a ``ModelSource`` or ``Series``) that ``args.run`` names, with the language-model
    options' defaults filled in; None for a run of ours, which must not have been given those options."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from induction_probes.circuits.interop.language_models import find_source

    source = find_source(args.run)
    given = [name for name in LM_OPTIONS if getattr(args, name, None) is not None]
    if source is None:
        if given:
            raise ValueError(f"--{given[0]} applies to language models only; {args.run} is a run")
        return None
    if hasattr(args, "lm_threshold"):
        args.length = DEFAULT_LENGTH if args.length is None else args.length
        args.threshold = args.lm_threshold if args.threshold is None else args.threshold
    return source


def device(args: argparse.Namespace) -> str:
    return getattr(args, "device", None) or "cpu"


def protocol(args: argparse.Namespace) -> dict:
    return {"length": args.length, "batch": args.n_seqs, "seed": args.seed}


def quiet_transformers() -> None:
    """The command's output is its table: no loading bar per checkpoint, no config warnings."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def boot(source, step: int | None, args: argparse.Namespace):
    from induction_probes.circuits.interop.language_models import load_bridge, require_model

    quiet_transformers()

    model = require_model(source, step)
    return model, load_bridge(model, device(args))


def title(source, model) -> str:
    """How a table names what it probed: the model, or the series and the step."""
    return f"series {source.name}, step {model.step}" if hasattr(source, "checkpoints") else f"model {model.describe()}"


def figure_stem(source, model) -> str:
    """A figure's file name starts with the model's (or series') folder or cache name, and its step."""
    name = Path(source.name if hasattr(source, "checkpoints") else model.location).name or "model"
    return name.replace("/", "_") + (f"_step{model.step}" if model.step is not None else "")


def header(source, model, args: argparse.Namespace) -> dict:
    """What every JSON answer about a language model starts with."""
    series = getattr(source, "steps", None)
    return {
        "model": model.describe() if model is not None else source.name,
        "steps": series,
        "protocol": "repeated random tokens [BOS] + R + R",
        **protocol(args),
    }


def run_probe(args: argparse.Namespace, source) -> str:
    from induction_probes.probes.lm.series import probe_model, probe_series

    if args.all_steps:
        if not hasattr(source, "checkpoints"):
            raise ValueError(f"{source.location} is one model, not a checkpoint series: --all-steps does not apply")
        if args.step is not None:
            raise ValueError("give --step or --all-steps, not both")
        quiet_transformers()
        return series_text(source, list(probe_series(source.checkpoints, device(args), **protocol(args))), args)
    model, bridge = boot(source, args.step, args)
    result = probe_model(bridge, model.step, **protocol(args))
    text_icl = read_text_icl(bridge, args.text) if args.text else None
    figures = []
    if args.plot:
        from induction_probes.probes.lm.plots import plot_lm_scores

        stem = figure_stem(source, model)
        figures = [
            plot_lm_scores(
                result.scores, f"{stem}: head scores on repeated random tokens", args.plot / f"{stem}_head_scores.png"
            )
        ]
    if args.json:
        extra = {"text_icl": text_icl.to_json()} if text_icl else {}
        body = {"threshold": args.threshold, **result.to_json(), **extra, "figures": [str(f) for f in figures]}
        return json_text(header(source, model, args) | body)
    return "\n".join([probe_text(source, model, bridge, result, text_icl, args)] + figure_lines(figures))


def read_text_icl(bridge, file: Path):
    from induction_probes.probes.lm.measure import text_icl_score

    if file.is_symlink() or not file.is_file():
        raise ValueError(f"{file} is not a regular file")
    with open(file, "rb") as handle:
        data = handle.read(MAX_TEXT)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{file} is not UTF-8 text") from None
    return text_icl_score(bridge, text)


def head_rows(scores, marked: set, score: str = "induction") -> list[list]:
    ranked = scores.ranked(score)
    other = "previous_token" if score == "induction" else "induction"
    rows = [
        [f"{layer}.{head}" + (" *" if (layer, head) in marked else ""), value, getattr(scores, other)[layer][head]]
        for layer, head, value in ranked[: max(TABLE_ROWS, len(marked))]
    ]
    return rows


def probe_text(source, model, bridge, result, text_icl, args: argparse.Namespace) -> str:
    scores, loss, n_heads = result.scores, result.loss, bridge.cfg.n_layers * bridge.cfg.n_heads
    induction, previous = scores.above(args.threshold), scores.above(args.threshold, "previous_token")
    shown = min(n_heads, max(TABLE_ROWS, len(induction)))
    lines = [
        f"{title(source, model)}: {bridge.cfg.n_layers} layers x {bridge.cfg.n_heads} head(s)",
        f"{args.n_seqs} sequences of repeated random tokens, R of {args.length} tokens, seed {args.seed}",
        format_table(["head (by induction)", "induction", "previous-token"], head_rows(scores, set(induction))),
        f"({shown} of {n_heads} heads; * marks induction score >= {args.threshold}; --json has every head)",
        f"induction heads (>= {args.threshold}): {heads_text(induction)}",
        f"previous-token heads (>= {args.threshold}): {heads_text(previous)}",
        f"loss on R: first copy {loss.first_half:.4f}, repeated copy {loss.repeated_half:.4f} (gap {loss.gap:.4f}); "
        f"ICL score {loss.icl_score:+.4f} (loss at token R[L/2] of the repeat minus its first occurrence)",
    ]
    if text_icl:
        t = text_icl
        lines.append(
            f"text ICL score {t.icl_score:+.4f}: loss at token {t.late} ({t.late_loss:.4f}) minus token "
            f"{t.early} ({t.early_loss:.4f}), {t.windows} window(s) of {args.text}"
        )
    return "\n".join(lines)


def heads_text(heads: list[tuple[int, int]]) -> str:
    return ", ".join(f"{layer}.{head}" for layer, head in heads) or "none"


def series_text(source, results: list, args: argparse.Namespace) -> str:
    """The per-step table (and JSON, and figure) of a checkpoint series."""
    figures = []
    if args.plot:
        from induction_probes.probes.lm.plots import plot_lm_series

        name = Path(source.name).name or "series"
        figures = [plot_lm_series(results, source.name, args.plot / f"{name}_induction_steps.png")]
    if args.json:
        body = {"threshold": args.threshold, "checkpoints": [r.to_json() for r in results]}
        return json_text(header(source, None, args) | body | {"figures": [str(f) for f in figures]})
    rows = []
    for r in results:
        prev, ind = r.best("previous_token"), r.best("induction")
        rows.append(
            [
                r.step,
                f"{prev[0]}.{prev[1]}",
                prev[2],
                f"{ind[0]}.{ind[1]}",
                ind[2],
                len(r.scores.above(args.threshold)),
                r.loss.first_half,
                r.loss.repeated_half,
                r.loss.icl_score,
            ]
        )
    headers = [
        "step",
        "prev-token head",
        "score",
        "induction head",
        "score",
        f"heads >= {args.threshold}",
        "loss first copy",
        "loss repeat",
        "ICL score",
    ]
    heading = (
        f"{source.name}: {len(results)} checkpoints, {args.n_seqs} sequences of repeated random tokens "
        f"(L = {args.length})"
    )
    return "\n".join([heading, format_table(headers, rows)] + figure_lines(figures))


def run_ablate(args: argparse.Namespace, source) -> str:
    """Each head (or the --heads set) ablated on repeated random tokens, ranked by the rise of the
    repeated copy's loss; marked where the rise is at least --threshold of the clean model's gap."""
    from tqdm.auto import tqdm

    from induction_probes.probes.ablation import parse_heads
    from induction_probes.probes.lm.ablation import ablation_study, single_heads
    from induction_probes.probes.lm.protocols import repeated_random_tokens

    model, bridge = boot(source, args.step, args)
    cfg = bridge.cfg
    if args.heads is None:
        head_sets = single_heads(bridge)
    else:
        head_sets = [parse_heads(args.heads, cfg.n_layers, lambda layer: cfg.n_heads)]
    tokens = repeated_random_tokens(bridge, args.length, args.n_seqs, args.seed)
    reference = repeated_random_tokens(bridge, args.length, args.n_seqs, args.seed + 1)  # other sequences, same shape
    bar = lambda sets: tqdm(sets, desc="ablating", unit="head set", disable=len(sets) < 2 or None)  # noqa: E731
    baseline, results = ablation_study(bridge, tokens, head_sets, args.mode, reference, args.seed, progress=bar)
    marked = [r.heads for r in results if baseline.gap > 0 and r.gap_removed >= args.threshold]
    figures = []
    if args.plot:
        from induction_probes.probes.lm.plots import plot_lm_ablation

        name = figure_stem(source, model)
        figures = [
            plot_lm_ablation(
                baseline,
                results[:TABLE_ROWS],
                f"{name}: {args.mode} ablation",
                args.plot / f"{name}_ablation_{args.mode}.png",
            )
        ]
    if args.json:
        body = {
            "mode": args.mode,
            "threshold": args.threshold,
            "baseline": baseline.to_json(),
            "ablations": [r.to_json() for r in results],
            "marked": [heads_text(h) for h in marked],
        }
        return json_text(header(source, model, args) | body | {"figures": [str(f) for f in figures]})
    return "\n".join(ablation_lines(title(source, model), args, baseline, results, marked) + figure_lines(figures))


def ablation_lines(name: str, args: argparse.Namespace, baseline, results: list, marked: list) -> list[str]:
    rows = [["none", baseline.repeated_half, 0.0, "", baseline.icl_score]]
    rows += [
        [
            heads_text(r.heads) + (" *" if r.heads in marked else ""),
            r.loss.repeated_half,
            r.loss_increase,
            f"{100 * r.gap_removed:.1f}%" if baseline.gap > 0 else "-",
            r.loss.icl_score,
        ]
        for r in results[: max(TABLE_ROWS, len(marked))]
    ]
    lines = [
        f"{name}: {args.mode} ablation on {args.n_seqs} sequences of repeated random tokens "
        f"(R of {args.length} tokens, seed {args.seed})",
        f"clean model: loss on the first copy {baseline.first_half:.4f}, on the repeat {baseline.repeated_half:.4f} "
        f"(gap {baseline.gap:.4f})",
        format_table(["ablated heads", "loss repeat", "rise", "share of gap", "ICL score"], rows),
    ]
    if baseline.gap <= 0:
        lines.append("the clean model predicts the repeat no better than the first copy: no induction to remove")
    else:
        names = ", ".join(heads_text(h) for h in marked) or "none"
        lines.append(f"* removes >= {100 * args.threshold:.0f}% of the gap: {names}")
    return lines


def run_info(args: argparse.Namespace, source) -> str:
    """What was loaded: the model, its architecture and sizes, its tokenizer, its checkpoints."""
    from induction_probes.circuits.interop.language_models import describe

    model, bridge = boot(source, args.step, args)
    about = describe(bridge)
    steps = getattr(source, "steps", None)
    if args.json:
        return json_text({"model": model.describe(), "step": model.step, "steps": steps, **about})
    grouped = about["n_key_value_heads"] not in (None, about["n_heads"])
    kv = f" ({about['n_key_value_heads']} key-value heads)" if grouped else ""
    tokenizer = about["tokenizer"]
    lines = [
        f"Hugging Face model {model.describe()}, booted through TransformerBridge",
        f"architecture {about['architecture']} ({about['model_type']}): {about['n_layers']} layers, "
        f"{about['n_heads']} head(s) per layer{kv}, d_model {about['d_model']}, d_head {about['d_head']}, "
        f"vocabulary {about['d_vocab']}, context {about['n_ctx']}, positions {about['positional']}",
        f"parameters: {about['parameters']:,} ({about['dtype']})",
        "tokenizer: "
        + (
            f"{tokenizer['class']}, {tokenizer['size']} tokens"
            if tokenizer
            else "none (the random-token probes need none; --text needs one)"
        ),
    ]
    if steps is not None:
        lines.append(f"checkpoint series: {len(steps)} steps from {steps[0]} to {steps[-1]}; loaded step {model.step}")
    return "\n".join(lines)
