"""What circuits do, measured through hooks. Probes never train and never mutate a model or a cache."""
