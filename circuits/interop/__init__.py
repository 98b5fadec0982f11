"""Other libraries' models: converting ours to and from TransformerLens's ``HookedTransformer``, and Hugging Face
language models booted through TransformerLens's bridge, read from disk only."""
