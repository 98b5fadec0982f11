"""Where circuits come from: ICL tasks, the hooked model, training and hand-made constructions."""
