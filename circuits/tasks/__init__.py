"""In-context learning tasks: samplers and the exact strategies to compare models against."""
