"""Next-byte prediction on a UTF-8 text file the user names: the natural-text task of Wang et al.'s Figure 3 (a
standard transformer trained on text, whose loss plateaus before it escapes).

The tokens are the file's bytes (256 symbols, whatever the text's alphabet: no vocabulary to save beside a run).
The file's last ``held_out`` share is never trained on: the evaluation and probe windows come from it. A run keeps
the file's SHA-256 and length in its config, so a run reads its own text back or refuses, and says which text it
was trained on even where the path means nothing.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F

import induction_probes.circuits.tasks.streams as streams
from induction_probes.circuits.config import option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_CORPUS_BYTES, require_seed, require_sequences
from induction_probes.circuits.tasks.task_config import TaskConfig
from induction_probes.circuits.untrusted import read_bytes
from induction_probes.circuits.validation import quoted, require_int

if TYPE_CHECKING:
    import torch
    from jaxtyping import Float, Int, UInt8
    from torch import Tensor

BYTES = 256  # the vocabulary: every byte value, present in the text or not
SHA256 = re.compile(r"[0-9a-f]{64}")


def read_corpus(file: str, sha256: str | None = None, n_bytes: int | None = None) -> bytes:
    """The bytes of ``file``: a regular file (not a link) of at most :data:`MAX_CORPUS_BYTES`, valid UTF-8, and
    the text of ``n_bytes`` bytes whose SHA-256 is ``sha256`` where they are given (a run's own text)."""
    path = Path(file)
    try:
        data = read_bytes(path, MAX_CORPUS_BYTES)
    except FileNotFoundError:
        raise BadInput(f"the text file {file} does not exist") from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInput(f"{file} is not UTF-8 text (byte {error.start} cannot be decoded)") from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise BadInput(f"{file} is not the text this task was made with (its SHA-256 differs from {sha256[:12]}…)")
    if n_bytes is not None and len(data) != n_bytes:  # the split is computed from n_bytes: it must be the file's
        raise BadInput(f"{file} has {len(data):,} bytes, not the {n_bytes:,} this task was made with")
    return data


def own_corpus(file: str, sha256: str, n_bytes: int) -> bytes:
    """:func:`read_corpus` of a task's own text, read and hashed once however many streams and sets it makes, and
    again once the file has changed on disk (its identity, size or modification time)."""
    try:
        status = os.lstat(file)
    except FileNotFoundError:
        raise BadInput(f"the text file {file} does not exist") from None
    return cached_corpus(file, sha256, n_bytes, (status.st_ino, status.st_size, status.st_mtime_ns))


@functools.lru_cache(maxsize=1)
def cached_corpus(file: str, sha256: str, n_bytes: int, version: tuple) -> bytes:
    return read_corpus(file, sha256, n_bytes)


def windows(
    tokens: UInt8[Tensor, " byte"], n_seqs: int, length: int, generator: torch.Generator
) -> Int[Tensor, "batch pos"]:
    """``n_seqs`` windows of ``length`` consecutive bytes at offsets drawn uniformly from every possible one."""
    offsets = torch.randint(len(tokens) - length + 1, (n_seqs,), generator=generator)
    return tokens[offsets.unsqueeze(1) + torch.arange(length)].long()


@dataclass(frozen=True)
class TextEvalSet:
    """Fixed windows of the held-out text: inputs, and the next byte at every position."""

    windows: Int[Tensor, "batch pos_plus_one"]

    @property
    def inputs(self) -> Int[Tensor, "batch pos"]:
        return self.windows[:, :-1]

    @property
    def targets(self) -> Int[Tensor, "batch pos"]:
        return self.windows[:, 1:]

    def position_losses(self, outputs: Float[Tensor, "batch pos d_vocab"]) -> Float[Tensor, "batch pos"]:
        """Cross-entropy of each next byte, in nats, computed in float64."""
        log_probs = outputs.double().log_softmax(-1)
        return -log_probs.gather(-1, self.targets.unsqueeze(-1)).squeeze(-1)

    def metrics(self, outputs: Float[Tensor, "batch pos d_vocab"]) -> dict:
        """``eval_loss`` (nats per byte, every position), ``accuracy`` (the most likely byte is the next one) and
        ``late_minus_early_loss``: the mean loss over the last quarter of positions minus that over the first
        quarter, a variant of Olsson et al.'s in-context learning score (theirs: the loss at token 500 minus that at
        token 50; negative: later bytes are predicted better, from what the context holds)."""
        losses = self.position_losses(outputs)
        quarter = max(losses.shape[1] // 4, 1)
        return {
            "eval_loss": losses.mean().item(),
            "accuracy": (outputs.argmax(-1) == self.targets).double().mean().item(),
            "late_minus_early_loss": (losses[:, -quarter:].mean() - losses[:, :quarter].mean()).item(),
        }


@dataclass(frozen=True)
class TextTask(TaskConfig):
    """Next-byte cross-entropy at every position of windows of a UTF-8 text file: training windows drawn uniformly
    from its first ``1 - held_out``, evaluation windows from the rest."""

    file: str = option(help="the UTF-8 text file whose bytes are the tokens")
    seq_len: int = option(128, "input bytes per sequence")
    held_out: float = option(0.1, "the file's last share, never trained on: the evaluation and probe windows")
    sha256: str | None = option(None)  # filled from the file when the task is made; a run's config keeps it
    n_bytes: int | None = option(None)  # likewise: the file's length

    name: ClassVar[str] = "text"

    def __post_init__(self) -> None:
        if not isinstance(self.file, str) or not self.file:
            raise BadInput("file must name a UTF-8 text file")
        require_int("seq_len", self.seq_len, 2)
        if not isinstance(self.held_out, int | float) or not 0.0 < self.held_out < 1.0:
            raise BadInput(f"held_out must be a share strictly between 0 and 1, got {quoted(self.held_out)}")
        if self.sha256 is None:  # a new task: the file itself says what it is
            data = read_corpus(self.file)
            object.__setattr__(self, "sha256", hashlib.sha256(data).hexdigest())
            object.__setattr__(self, "n_bytes", len(data))
        if not isinstance(self.sha256, str) or not SHA256.fullmatch(self.sha256):
            raise BadInput(f"sha256 must be 64 lower-case hexadecimal digits, got {quoted(self.sha256)}")
        require_int("n_bytes", self.n_bytes, 1)
        shortest = min(self.split(), self.size() - self.split())
        if shortest < self.seq_len + 1:
            raise BadInput(
                f"{self.file} has {self.size():,} bytes: its training and held-out parts must each hold a window "
                f"of seq_len + 1 = {self.seq_len + 1} bytes (the shorter has {shortest:,})"
            )

    def size(self) -> int:
        """``n_bytes``, which construction fills in from the file where it was not given."""
        if self.n_bytes is None:
            raise BadInput(f"the text task of {self.file} does not know its length")
        return self.n_bytes

    def checksum(self) -> str:
        """``sha256``, which construction fills in from the file where it was not given."""
        if self.sha256 is None:
            raise BadInput(f"the text task of {self.file} does not know its SHA-256")
        return self.sha256

    def split(self) -> int:
        """The first held-out byte: the training text is everything before it."""
        return math.floor(self.size() * (1.0 - self.held_out))

    def tokens(self, part: str) -> UInt8[Tensor, " byte"]:
        """The bytes of the ``"train"`` or ``"held_out"`` part of the run's own text."""
        data = own_corpus(self.file, self.checksum(), self.size())
        cut = self.split()
        return torch.frombuffer(bytearray(data[:cut] if part == "train" else data[cut:]), dtype=torch.uint8)

    def numbers_per_sequence(self) -> int:
        """About how many numbers one sequence costs: its logits and one attention pattern."""
        return self.seq_len * (BYTES + self.seq_len)

    def describe(self) -> str:
        return f"text {Path(self.file).name} ({self.size():,} bytes, sha256 {self.checksum()[:12]}), T={self.seq_len}"

    def progress(self, metrics: dict) -> str:
        return f"eval loss {metrics['eval_loss']:.4f} nats/byte"

    def stream(self, seed: int):
        train = self.tokens("train")
        return streams.GeneratorStream(
            lambda n_seqs, generator: windows(train, n_seqs, self.seq_len + 1, generator), seed
        )

    def inputs_and_targets(self, sample: Tensor) -> tuple[Tensor, Tensor]:
        return sample[:, :-1], sample[:, 1:]

    def loss(self, outputs: Tensor, targets: Tensor) -> Float[Tensor, ""]:
        return F.cross_entropy(outputs.flatten(0, 1), targets.flatten())

    def eval_set(self, n_seqs: int, seed: int) -> TextEvalSet:
        require_int("n_seqs", n_seqs, 1)
        require_seed("seed", seed)
        require_sequences("n_seqs", n_seqs, self.numbers_per_sequence())
        generator = torch.Generator().manual_seed(seed)
        return TextEvalSet(windows(self.tokens("held_out"), n_seqs, self.seq_len + 1, generator))

    def baselines(self, eval_set: TextEvalSet) -> dict[str, float]:
        """The loss on ``eval_set`` of two predictors fitted to the training text, what a model's loss is read
        against: ``unigram`` (each byte's frequency) and ``bigram`` (each byte's frequency after the current
        one), both with one pseudo-count per byte value (add-one)."""
        train = self.tokens("train").int()  # int32 pair codes: a quarter of int64's memory on a large text
        unigram = torch.bincount(train, minlength=BYTES).double() + 1.0
        pairs = torch.bincount(train[:-1] * BYTES + train[1:], minlength=BYTES * BYTES).double().view(BYTES, BYTES)
        bigram = pairs + 1.0
        log_unigram = (unigram / unigram.sum()).log()
        log_bigram = (bigram / bigram.sum(-1, keepdim=True)).log()
        targets, inputs = eval_set.targets, eval_set.inputs
        return {
            "unigram": -log_unigram[targets].mean().item(),
            "bigram": -log_bigram[inputs, targets].mean().item(),
        }
