"""The largest sizes a config or an argument may ask for, all in this one place.

A run directory is untrusted input, and one edited number (``n_layers: 1000000`` in its config.json) or
one typed one (``--k 100000``) must not grow to gigabytes before failing. So every config checks the
sizes it implies against these limits when it is made, before anything is allocated or written, and
the command line refuses more in one line with status 2. The limits are far above this project's
models (the shipped ones have about 2,000 parameters) and its experiments.
"""

from __future__ import annotations

import math

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.validation import require_int

MAX_NUMBERS = 1 << 28  # numbers in any one tensor a command builds (1 GiB of float32)
MAX_PARAMETERS = 1 << 26  # parameters of a model (256 MiB of float32)
MAX_LAYERS = 256  # every layer is a module of its own: Python objects, not only numbers
MAX_HEADS = 4096  # heads in one layer
MAX_SEQUENCES = 10**7  # sequences one command draws (baselines, probes, evaluation sets)
MAX_STEPS = 10**9  # optimiser steps of a run
MAX_CHECKPOINTS = 10_000  # checkpoints on a run's schedule (each is a file)
MAX_TEXT_BYTES = 1 << 26  # a run's JSON file (config, manifest, metrics): 64 MiB, far above 10,000 checkpoints' worth
MAX_CORPUS_BYTES = 1 << 28  # a text task's file: 256 MiB, a few hundred times the shipped text
MAX_CELLS = 10_000  # runs in one sweep: conditions x grid points x seeds, counted before any is made
MAX_SPEC_BYTES = 1 << 20  # a sweep's spec.toml: 1 MiB, far above any spec a person writes
MAX_NAME = 100  # characters of one directory name a spec makes (a condition, a grid key=value)
MAX_SEED = 2**62  # torch's generators take at most 2^64 - 1; a run's seeds are S, S + 1, S + 2

# The LLC estimator's sampling (probes/llc): each chain is a copy of the model and runs burn_in + draws SGLD steps,
# a forward and a backward pass each, for every checkpoint and calibration case. The rule's defaults are 4 chains
# and a burn-in (and as many draws) of at most 100,000 steps (MAX_RULE_STEPS in probes/llc/estimator.py); Lau et
# al. sample a few thousand. These admit 16 times the default chains and the rule's largest burn-in and draws, and
# refuse what would sample for days or hold a billion copies of the model.
MAX_CHAINS = 64  # SGLD chains of one estimate
MAX_DRAWS = 100_000  # draws per chain after the burn-in
MAX_BURN_IN = 100_000  # SGLD steps per chain before the draws

# A Hugging Face model folder (circuits/interop) names its own sizes, so they are checked before anything is built.
# These admit GPT-2 small to XL, Pythia up to 1.4B and Llama-style models of up to about 2B parameters (Llama 3.2
# 1B, TinyLlama, SmolLM, Qwen2.5 1.5B), and refuse a model whose float32 weights one CPU machine's memory could
# not hold alongside the probes' activations. Layers are bounded by MAX_LAYERS, as for our own models.
MAX_LM_PARAMETERS = 1 << 31  # 2.1 billion (8 GiB of float32): Pythia 1.4B and Llama 3.2 1B fit, Pythia 2.8B does not
MAX_LM_HEADS = 256  # heads in one layer: the largest open models have 128; a probe holds every head's pattern
MAX_LM_WIDTH = 1 << 14  # hidden size and head size: 16,384 is Llama 3 405B's width, GPT-2 medium's is 1,024
MAX_LM_VOCABULARY = 1 << 18  # 262,144 tokens: Gemma's 256,000 is the largest vocabulary in use, GPT-2's 50,257
MAX_LM_CONTEXT = 1 << 17  # 131,072 positions: Llama 3.2's; a learned position table is counted in the parameters
MAX_LM_WEIGHT_BYTES = 1 << 34  # 16 GiB of safetensors in all: MAX_LM_PARAMETERS in float32 twice over, for buffers


def require_at_most(name: str, value: int, limit: int) -> int:
    if value > limit:
        raise BadInput(f"{name} = {value} is above the limit of {limit:,} (circuits/limits.py)")
    return value


def require_seed(name: str, value: object) -> int:
    """A seed: an integer from 0 to :data:`MAX_SEED`, the same rule for every command and config."""
    return require_at_most(name, require_int(name, value, 0), MAX_SEED)


def require_numbers(what: str, count: int) -> int:
    """Refuse a tensor of ``count`` numbers above :data:`MAX_NUMBERS`, before it is made."""
    if count > MAX_NUMBERS:
        raise BadInput(
            f"{what} would hold {count:.3g} numbers, above the limit of {MAX_NUMBERS:,} (circuits/limits.py)"
        )
    return count


def require_power(what: str, base: int, exponent: int, factor: int = 1) -> int:
    """``factor * base ** exponent`` if at most :data:`MAX_NUMBERS`; checked by logarithms first, since
    the power itself of a hostile base and exponent would take Python ages to compute."""
    if exponent * math.log2(base) + math.log2(factor) > math.log2(MAX_NUMBERS) + 1:
        size = f"{base}^{exponent}" if factor == 1 else f"{factor} x {base}^{exponent}"
        raise BadInput(f"{what} would hold {size} numbers, above the limit of {MAX_NUMBERS:,} (circuits/limits.py)")
    return require_numbers(what, factor * base**exponent)


def require_sequences(name: str, n_seqs: int, numbers_per_sequence: int) -> int:
    """``n_seqs`` sequences of ``numbers_per_sequence`` numbers each: not too many, not too big together."""
    require_at_most(name, n_seqs, MAX_SEQUENCES)
    require_numbers(f"{n_seqs} sequences ({name})", n_seqs * numbers_per_sequence)
    return n_seqs
