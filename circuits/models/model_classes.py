"""The model-class registry: the models a run may hold, by the name its ``config.json`` writes
(``model_class``). A registration is the model class; its ``config_class`` attribute is the config it is built
from, so that loading a run rebuilds the config from ``config.json`` and the model from the config."""

from __future__ import annotations

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
