"""Shipped training runs, one run directory each (the format: :mod:`induction_probes.circuits.runs`).

Installed as ``induction_probes.checkpoints`` so that ``importlib.resources`` finds the runs by name in
editable and wheel installs alike; it holds no code.
"""
