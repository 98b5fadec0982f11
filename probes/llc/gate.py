"""Calibration that gates: whether the estimator, at the settings of a result, reads the known coefficients of
the calibration models, and the mark every estimate of that result carries where it does not.

**The tolerance.** An estimate holds its truth λ where |λ̂ − λ| ≤ 10 % of λ plus three standard errors over
chains, and misses otherwise. The 10 %: γ = 0.01 nβ λ_max takes ½ / (1 + 0.01 κ) from a direction whose
curvature is λ_max / κ, and the step adds 2.5 % (:mod:`.estimator`); three standard errors are the chains' own
noise. Wide chains could otherwise excuse any error, so a relative error above 20 % is a miss whatever the
chains' spread. A refused case is a miss: the estimator said nothing where the truth is known.

Where any case misses, the result's estimates are marked "calibration fails at these settings" (its JSON's
flags, its text and its figure), naming each case and by how much it missed (:func:`gate`).
"""

from __future__ import annotations

TOLERANCE_SHARE = 0.1  # of the truth, besides three standard errors over chains (module docstring)
MAX_RELATIVE_ERROR = 0.2  # a miss whatever the chains' spread
FAILS = "calibration fails at these settings"  # how the mark on a result's estimates begins
UNCALIBRATED = "uncalibrated"  # a γ/4 value whose calibration misses: shown, and nothing rests on it


def within_tolerance(estimate: float | None, truth: float, stderr: float | None) -> bool:
    """Whether ``estimate`` holds ``truth`` by the module's tolerance (None, a refusal, never does)."""
    if estimate is None:
        return False
    error = abs(estimate - truth)
    return error <= TOLERANCE_SHARE * truth + 3 * (stderr or 0.0) and error <= MAX_RELATIVE_ERROR * truth


def gate(cases: list[dict]) -> dict:
    """The verdict on a calibration: ``cases`` are {name, estimate, truth, stderr}. ``holds`` where every
    case does; ``misses`` names each other case with its estimate, truth and relative error; ``mark`` is the
    flag the result's estimates carry (empty where the calibration holds)."""
    misses = [miss(case) for case in cases if not within_tolerance(case["estimate"], case["truth"], case["stderr"])]
    shown = ", ".join(
        f"{m['name']} refused (truth {m['truth']:g})"
        if m["estimate"] is None
        else f"{m['name']} {m['estimate']:.3g} against {m['truth']:g} ({m['relative_error']:+.0%})"
        for m in misses
    )
    return {
        "holds": not misses,
        "misses": misses,
        "tolerance": (
            f"{TOLERANCE_SHARE:.0%} of the truth plus three standard errors over chains, and never more than "
            f"{MAX_RELATIVE_ERROR:.0%}"
        ),
        "cases": len(cases),
        "mark": f"{FAILS}: {len(misses)} of {len(cases)} calibration cases miss: {shown}" if misses else "",
    }


def miss(case: dict) -> dict:
    estimate, truth = case["estimate"], case["truth"]
    relative = None if estimate is None else (estimate - truth) / truth
    return {"name": case["name"], "estimate": estimate, "truth": truth, "relative_error": relative}


def marked(records: list[dict], verdict: dict) -> list[dict]:
    """``records`` (estimates of one result) with the failing calibration's mark in their flags."""
    if verdict["holds"]:
        return records
    return [r | {"flags": [*r.get("flags", []), verdict["mark"]]} for r in records]


def quarter_label(verdict: dict) -> str:
    """How a result labels its values at γ/4 from the calibration's verdict at γ/4: "calibrated", or
    "uncalibrated" with the cases that miss (a change over training then rests on γ alone)."""
    if verdict["holds"]:
        return "calibrated"
    return f"{UNCALIBRATED}: {len(verdict['misses'])} of {verdict['cases']} calibration cases miss at γ/4"
