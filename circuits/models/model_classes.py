"""The model-class registry: the models a run may hold, by the name its ``config.json`` writes
(``model_class``). A registration is the model class; its ``config_class`` attribute is the config it is built
from, so that loading a run rebuilds the config from ``config.json`` and the model from the config
(:func:`config_class`, :func:`build_model`)."""

from __future__ import annotations

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.minimal import MinimalModel
from induction_probes.circuits.models.model import HookedTransformer
from induction_probes.circuits.models.toy_model import ToyModel
from induction_probes.circuits.registry import Expects, Registry


def is_model_class(entry: object) -> bool:
    return isinstance(entry, type) and hasattr(entry, "config_class")


MODEL_CLASSES = Registry("model class", __name__, Expects("a model class with a config_class", is_model_class))
MODEL_CLASSES.register("HookedTransformer", HookedTransformer)
MODEL_CLASSES.register("MinimalModel", MinimalModel)
MODEL_CLASSES.register("ToyModel", ToyModel)


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
