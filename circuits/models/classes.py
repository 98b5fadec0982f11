"""The model classes a run may hold, by the name written in its ``config.json`` (``model_class``): what
run loading needs to rebuild a model from its config, kept beside the models.
"""

from __future__ import annotations

from induction_probes.circuits.models.minimal import MinimalConfig, MinimalModel
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.models.toy import ToyConfig, ToyModel

# The model classes a run may hold, by the name written in config.json ("model_class").
MODEL_CLASSES = {
    "HookedTransformer": (HookedTransformer, HookedTransformerConfig),
    "MinimalModel": (MinimalModel, MinimalConfig),
    "ToyModel": (ToyModel, ToyConfig),
}


def model_class_name(config: HookedTransformerConfig | MinimalConfig) -> str:
    return next(name for name, (_, config_class) in MODEL_CLASSES.items() if isinstance(config, config_class))


def build_model(config: HookedTransformerConfig | MinimalConfig) -> HookedTransformer | MinimalModel:
    return MODEL_CLASSES[model_class_name(config)][0](config)
