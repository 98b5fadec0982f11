"""The calibration verdict every :func:`~.estimator.estimate_llc` result carries, without sampling the calibration
cases on every call: the estimator at the rule's defaults was run on every case of :mod:`.calibration` (on 2,000
samples, ``experiments/llc_calibration.py``, shipped as ``experiments/results/llc-calibration/cases.json``), and
the gate's verdict on that file, at γ and at γ/4, is copied here (a test recomputes it from the file). An estimate
at those settings carries it; one at other settings is "uncalibrated at these settings", with the call that
calibrates them (:func:`~.calibration.calibration_verdict`)."""

from __future__ import annotations

NEUTRAL = frozenset({"seed", "localization_check"})  # settings that leave the rule, and so the calibration, as is
SHIPPED_AT = "the rule's defaults, calibrated on 2,000 samples (experiments/results/llc-calibration/cases.json)"
SHIPPED = {  # the gate's verdict on that file (tests/unit/test_llc_calibrated.py recomputes it)
    "holds": False,
    "misses": [
        "linear-d20-spread1000",
        "rrr-M3-N5-H2-r0",
        "product-balanced",
        "product-on-axis",
        "dln-2-2-2-2-origin",
    ],
    "cases": 14,
    "holds_at_quarter_gamma": False,
}
UNCALIBRATED = "uncalibrated at these settings"


def verdict_for(given: dict) -> dict:
    """The calibration verdict of an estimate whose caller gave ``given`` (settings that override the rule)."""
    overridden = sorted(set(given) - NEUTRAL)
    if not overridden:
        held = "holds" if SHIPPED["holds"] else f"fails: {', '.join(SHIPPED['misses'])} miss"
        return {
            "settings": SHIPPED_AT,
            "verdict": f"calibration {held} ({len(SHIPPED['misses'])} of {SHIPPED['cases']} cases miss)",
        } | SHIPPED
    shown = ", ".join(f"{name}={given[name]!r}" for name in overridden)
    return {
        "settings": f"given: {shown}",
        "verdict": UNCALIBRATED,
        "holds": None,
        "calibrate_with": f"induction_probes.probes.llc.calibration.calibration_verdict(n=N_SAMPLES, {shown})",
    }
