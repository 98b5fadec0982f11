"""Shipped training runs, one run directory each (see circuits/checkpoint.py for the format).

A package only so that the runs are installed with the project and found by name after a
non-editable install; it holds no code.
"""
