"""The text of ``induction-probes llc`` (the whole model): a table that fits 100 columns, each refusal on a line of
its own beside it (blank at both resolutions: a refusal is no value), the step that set γ, and the γ/4 column's
calibration. The diagnostics of every estimate and every calibration case are ``--verbose``'s, and the JSON's."""

from __future__ import annotations

import textwrap

from induction_probes.probes.llc.gate import FAILS
from induction_probes.probes.llc.resolution import SERIES
from induction_probes.probes.report.tables import format_table

WIDTH = 100  # columns of every line of the text


def wrapped(line: str) -> str:
    """``line`` folded to :data:`WIDTH` columns, its continuation lines indented."""
    return textwrap.fill(line, WIDTH, subsequent_indent="    ", break_on_hyphens=False)


def number(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def quarter_value(estimate: dict) -> str:
    """The estimate at γ/4 (the localization check), blank where the estimate at γ is refused."""
    if estimate["llc"] is None:
        return "-"
    check = (estimate.get("diagnostics") or {}).get("localization_check") or {}
    return number(check.get("estimate"))


def setting_cells(settings: dict | None) -> list[str]:
    """n·β and γ of one estimate (none where it was refused before any setting followed)."""
    return ["-", "-"] if settings is None else [f"{settings['n_beta']:.4g}", f"{settings['localization']:.3g}"]


def row(name, estimate: dict, mark: str, sequences="-", closest="-") -> list:
    """A table row; the LLC marked * where the estimate carries a flag (other than the calibration's ``mark``)."""
    flagged = any(flag != mark for flag in estimate["flags"])
    values = [number(estimate["llc"]) + (" *" if flagged else ""), number(estimate["llc_std"]), quarter_value(estimate)]
    return [name, sequences, closest, *values, *setting_cells(estimate["settings"])]


def gamma_line(estimates: list[dict]) -> str:
    """Which γ the checkpoints were sampled at, and which step set it (and which could not)."""
    resolution = estimates[0]["resolution"]
    if resolution.get("rule") != SERIES:
        return "γ: the rule at each point's own curvature (the construction: its own)"
    said = f"γ {resolution['localization']:.3g} for every step: the rule at step {resolution['set_by']}, the stiffest"
    if "not_setting" not in resolution:  # written before refused checkpoints were kept from setting γ
        return said + " checkpoint listed, refused or not"
    left_out = "; ".join(f"step {step}: {short(reason)}" for step, reason in resolution["not_setting"].items())
    return (
        said
        + " checkpoint that is a minimum"
        + (f" (not set by {left_out})" if left_out else "")
        + "; the construction: its own"
    )


def short(reason: str) -> str:
    """A refusal's kind, the words before its first colon ("not a minimum", "diverged")."""
    return reason.split(":")[0]


def quarter_line(calibration: dict) -> str:
    verdict = calibration.get("gate_quarter")
    if verdict is None:
        return "at γ/4: the localization check; its calibration was not gated when this file was written"
    if verdict["holds"]:
        return "at γ/4: the localization check, calibrated there as at γ"
    return (
        f"at γ/4: the localization check, UNCALIBRATED ({len(verdict['misses'])} of {verdict['cases']} calibration "
        "cases miss there): shown beside, nothing rests on it"
    )


def refusal_lines(named: list[tuple[str, dict]]) -> list[str]:
    return [wrapped(f"refused, {name}: {'; '.join(e['problems'])}") for name, e in named if e["llc"] is None]


def calibration_lines(calibration: dict, verbose: bool) -> list[str]:
    verdict = calibration["gate"]
    held = verdict["cases"] - len(verdict["misses"])
    lines = [wrapped(f"calibration at the same settings ({verdict['tolerance']}): {held} of {verdict['cases']} hold")]
    if verbose:
        lines += [
            f"  {c['name']}: {number(c['estimate'])} (truth {c['truth']:g})"
            + (f", at γ/4 {number(c['quarter']['estimate'])}" if c.get("quarter") else "")
            for c in calibration["cases"]
        ]
    return lines


def diagnostic_lines(named: list[tuple[str, dict]], mark: str) -> list[str]:
    """``--verbose``: every estimate's problems and flags (less the failing calibration's mark, shown above)."""
    lines = ["diagnostics:"]
    for name, e in named:
        said = e["problems"] + [f for f in e["flags"] if f != mark]
        lines += [wrapped(f"  {name}: {line}") for line in said] or [f"  {name}: none"]
    return lines


def failing_line(verdict: dict, verbose: bool) -> str:
    """The failing calibration's mark in capitals: how many cases miss, and with ``verbose`` which and by how much."""
    if verbose:
        return FAILS.upper() + verdict["mark"][len(FAILS) :]
    count = f"{len(verdict['misses'])} of {verdict['cases']}"
    return f"{FAILS.upper()}: {count} calibration cases miss (--verbose names them)"


def whole_text(
    run_name: str, settings: dict, estimates: list[dict], construction: dict, calibration: dict, verbose: bool = False
) -> str:
    """The whole-model text (module docstring); ``verbose`` adds every diagnostic and calibration case."""
    mark = calibration["gate"]["mark"]
    named = [(f"step {e['step']}", e) for e in estimates] + [(f"Prop. 2.1 {n}", e) for n, e in construction.items()]
    rows = [row(e["step"], e, mark, e["sequences_seen"], e["closest"]) for e in estimates]
    rows += [row(f"Prop. 2.1 {name}", e, mark) for name, e in construction.items()]
    given = ", ".join(f"{k} {v}" for k, v in settings.items()) or "none"
    headers = ["step", "sequences", "closest", "LLC", "sd", "at γ/4", "n·β", "γ"]
    failing = [wrapped(failing_line(calibration["gate"], verbose))] if mark else []
    return "\n".join(
        [
            wrapped(f"run {run_name}: local learning coefficient (settings given: {given}; the rest by the rule)"),
            *failing,
            wrapped(gamma_line(estimates)),
            wrapped(quarter_line(calibration)),
            format_table(headers, rows),
            "*: flagged (--verbose and the JSON say why); -: refused, at both resolutions (no value)",
            *refusal_lines(named),
            *calibration_lines(calibration, verbose),
            *(diagnostic_lines(named, mark) if verbose else []),
        ]
    )
