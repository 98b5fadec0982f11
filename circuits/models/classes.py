"""Rebuilding a run's model: the registered model class (:mod:`~induction_probes.circuits.models.model_classes`) whose
``config_class`` a config is, by the name written in its ``config.json`` (``model_class``)."""

from __future__ import annotations

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.model_classes import MODEL_CLASSES


def model_class_name(config) -> str:
    """The registered name of the model class built from ``config`` (the first whose config class it is)."""
    for name in MODEL_CLASSES:
        if isinstance(config, MODEL_CLASSES.get(name).config_class):
            return name
    known = ", ".join(MODEL_CLASSES)
    raise BadInput(f"no registered model class is built from a {type(config).__name__} (known: {known})")


def config_class(name: str) -> type:
    """The config class of the model class registered as ``name``."""
    return MODEL_CLASSES.get(name).config_class


def build_model(config):
    return MODEL_CLASSES.get(model_class_name(config))(config)
