"""Tiny randomly initialised Hugging Face models of three architectures (GPT-2, GPT-NeoX as Pythia uses it,
Llama with grouped-query attention), saved with ``save_pretrained``: the language-model tests' fixtures.
Llama's directory gets a word-level tokenizer built here with the ``tokenizers`` library."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in these tests may download
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

VOCAB = 64
N_CTX = 64
WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(3, VOCAB)]


def config(architecture: str):
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    if architecture == "gpt2":
        return GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=N_CTX, bos_token_id=None, eos_token_id=None
        )
    if architecture == "neox":
        return GPTNeoXConfig(
            num_hidden_layers=2,
            hidden_size=48,
            num_attention_heads=4,
            intermediate_size=96,
            vocab_size=VOCAB,
            max_position_embeddings=N_CTX,
            rotary_pct=0.25,
        )
    return LlamaConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=VOCAB,
        max_position_embeddings=N_CTX,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=None,
    )


def word_tokenizer():
    """A word-level tokenizer over WORDS (ids = positions in WORDS), with <s> as BOS."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel({word: i for i, word in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def save_model(architecture: str, directory: Path, seed: int = 0) -> Path:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config(architecture), attn_implementation="eager")
    model.save_pretrained(directory)
    if architecture == "llama":
        word_tokenizer().save_pretrained(directory)
    return directory


def hf_attentions(directory: Path, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Hugging Face's own attention weights (``output_attentions=True``, eager attention), per layer
    [batch, head, query, key]: the reference the probes are checked against."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    with torch.no_grad():
        return [a.double() for a in model(tokens, output_attentions=True).attentions]


def hf_scores(directory: Path, tokens: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[batch, layer, head] previous-token and induction scores from Hugging Face's attention weights, entry by
    entry: sequence s ends with R + R, |R| = lengths[s]; its induction score is the mean over the second R's
    queries i of A[i, i - L + 1], its previous-token score the mean over i >= 1 of A[i, i - 1]."""
    attentions = hf_attentions(directory, tokens)
    n, n_pos = tokens.shape
    previous = torch.zeros(n, len(attentions), attentions[0].shape[1], dtype=torch.float64)
    induction = torch.zeros_like(previous)
    for layer, pattern in enumerate(attentions):
        for s in range(n):
            length = int(lengths[s])
            queries = range(n_pos - length, n_pos)
            for head in range(pattern.shape[1]):
                a = pattern[s, head]
                previous[s, layer, head] = sum(a[i, i - 1] for i in range(1, n_pos)) / (n_pos - 1)
                induction[s, layer, head] = sum(a[i, i - length + 1] for i in queries) / length
    return previous, induction


ARCHITECTURES = ("gpt2", "neox", "llama")


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to reach the network (a download) fails the test instead of waiting on it: a test module that
    imports this fixture gets it for every test."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("a language-model test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def saved_models(tmp_path_factory, names=ARCHITECTURES, folder: str = "lm") -> dict[str, Path]:
    """One tiny model of each architecture in ``names``, saved in a folder of the session's."""
    root = tmp_path_factory.mktemp(folder)
    return {name: save_model(name, root / name) for name in names}
