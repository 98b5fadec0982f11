"""The models: the attention-only HookedTransformer (its config, maths and TransformerLens-shaped interface),
Edelman et al.'s minimal model, Wang et al.'s toy model, and the lookup of a model class by its name in a run."""
