"""A journal of a head ablation: one JSON line per finished head set, so that an ablation of every head of a large
model, stopped by Ctrl-C or a kill, resumes where it stopped, and so that its results can be read while it runs.

The file holds, one JSON object a line:

1. a header: what was ablated how (``mode``, ``seed``) and SHA-256 fingerprints of the probed and reference
   sequences;
2. the clean model's losses per sequence (``heads`` empty): the fingerprint of the model, since the same model on
   the same sequences gives the same losses, and another model different ones;
3. one line per head set: its ``heads`` and its per-sequence losses ``first_half``, ``repeated_half`` and ``icl``
   (:class:`~induction_probes.probes.lm.protocols.InductionLoss`), as float64 written so that they read back
   exactly.

A rerun with the same settings reads every complete line back and ablates only the head sets that have none; a last
line cut short by a kill is dropped. A journal of other settings or of another model is refused, not mixed in.
The file is a stranger's file like a run's (:mod:`~induction_probes.circuits.untrusted`): a link, a file that is not
regular or that has other names (a hard link), or one too large is refused, and only one process writes it at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.untrusted import lock_or_refuse, open_for_writing
from induction_probes.circuits.validation import quoted
from induction_probes.probes.lm.protocols import InductionLoss

if TYPE_CHECKING:
    from induction_probes.probes.lm.protocols import RepeatedTokens

KIND = "induction-probes head ablation journal"
VERSION = 1
MAX_JOURNAL_BYTES = 1 << 30  # 1 GiB: every head of a 2,048-head model on 10,000 sequences is about 700 MB
SAME_MODEL_NATS = 1e-4  # the clean losses of one model agree far closer than this on any CPU (float32 rounding)
PARTS = ("first_half", "repeated_half", "icl")
Key = tuple[tuple[int, int], ...]


def fingerprint(tokens: RepeatedTokens | None) -> str | None:
    """SHA-256 of a protocol's token ids, |R| per sequence and prefix: equal exactly for the same sequences."""
    if tokens is None:
        return None
    digest = hashlib.sha256()
    for part in (tokens.tokens, tokens.lengths):
        digest.update(part.to(torch.int64).contiguous().numpy().tobytes())
    digest.update(str(tokens.prefix).encode())
    return digest.hexdigest()


class AblationJournal:
    """An open journal (module docstring): :meth:`start` checks or writes the clean losses and returns the head
    sets already done, :meth:`record` appends one."""

    def __init__(self, path: Path, handle, header: dict, lines: list[dict]):
        self.path, self.handle, self.header, self.lines = path, handle, header, lines

    @classmethod
    @contextmanager
    def open(cls, path: str | os.PathLike, settings: dict) -> Iterator[AblationJournal]:
        """The journal at ``path`` for an ablation with ``settings`` (mode, seed, tokens, reference), created if
        missing or empty, held locked until the block ends."""
        path = Path(path)
        header = {
            "journal": KIND,
            "version": VERSION,
            "mode": settings["mode"],
            "seed": settings["seed"],
            "sequences": fingerprint(settings["tokens"]),
            "reference sequences": fingerprint(settings["reference"]),
        }
        descriptor = open_for_writing(path, os.O_RDWR | os.O_CREAT)
        with os.fdopen(descriptor, "r+b") as handle:
            lock_or_refuse(handle, BadInput(f"{path} is being written by another ablation"))
            lines = read_lines(path, handle)
            if not lines:
                write_line(handle, header)
            elif lines[0] != header:
                differ = ", ".join(name for name, value in header.items() if lines[0].get(name) != value)
                raise BadInput(f"{path} is the journal of an ablation that differs in its {differ}: give another file")
            yield cls(path, handle, header, lines[1:])

    def start(self, baseline: InductionLoss) -> dict[Key, InductionLoss]:
        """Check the journal's clean losses against ``baseline`` (or write them), and return the head sets done."""
        if not self.lines:
            self.record((), baseline)
            return {}
        kept = parse_loss(self.path, self.lines[0], len(baseline.first_half_per_sequence))
        if kept[0] != () or not close(kept[1], baseline):
            raise BadInput(f"{self.path} is the journal of another model (its clean losses differ): give another file")
        return dict(parse_loss(self.path, line, len(baseline.first_half_per_sequence)) for line in self.lines[1:])

    def record(self, heads: Key, loss: InductionLoss) -> None:
        """Append one finished head set (``()``: the clean model), on disk before this returns."""
        line = {"heads": [list(head) for head in heads]}
        line |= {part: getattr(loss, f"{part}_per_sequence").tolist() for part in PARTS}
        write_line(self.handle, line)


def read_lines(path: Path, handle) -> list[dict]:
    """The complete lines of the journal open as ``handle``; a last line without its newline (a write cut short)
    is cut off the file, so that the next line starts clean."""
    status = os.fstat(handle.fileno())  # its links were refused as it opened (open_for_writing)
    if status.st_size > MAX_JOURNAL_BYTES:
        raise BadInput(f"{path} is larger than a journal can be ({MAX_JOURNAL_BYTES:,} bytes)")
    data = handle.read(MAX_JOURNAL_BYTES + 1)
    complete = data[: data.rfind(b"\n") + 1]
    lines = [entry(path, number, text) for number, text in enumerate(complete.splitlines(), 1)]
    if data and not (lines and lines[0].get("journal") == KIND):  # checked before a byte of it is cut
        raise BadInput(f"{path} is not an ablation journal: refusing to write into it")
    if len(complete) < len(data):
        handle.truncate(len(complete))
    handle.seek(0, os.SEEK_END)
    return lines


def entry(path: Path, number: int, text: bytes) -> dict:
    """Line ``number`` of a journal as a JSON object, or a refusal naming it."""
    try:
        line = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        line = None
    if not isinstance(line, dict):
        raise BadInput(f"line {number} of {path} is not a journal entry: is it an ablation journal?")
    return line


def write_line(handle, line: dict) -> None:
    handle.write(json.dumps(line, allow_nan=True).encode() + b"\n")
    handle.flush()
    os.fsync(handle.fileno())


def parse_loss(path: Path, line: dict, n: int) -> tuple[Key, InductionLoss]:
    """One journaled head set, checked: heads as pairs of integers, each part n numbers."""
    heads, parts = line.get("heads"), [line.get(part) for part in PARTS]
    pairs = isinstance(heads, list) and all(
        isinstance(h, list) and len(h) == 2 and all(type(v) is int and 0 <= v < 1 << 31 for v in h) for h in heads
    )
    numbers = all(isinstance(p, list) and len(p) == n and all(type(v) is float for v in p) for p in parts)
    if not isinstance(heads, list) or not (pairs and numbers):
        raise BadInput(f"{path} holds an entry that is not {n} sequences' losses of a head set: {quoted(heads)}")
    key = tuple((layer, head) for layer, head in heads)
    return key, InductionLoss(*(torch.tensor(p, dtype=torch.float64) for p in parts))


def close(kept: InductionLoss, baseline: InductionLoss) -> bool:
    pairs = [(getattr(kept, f"{part}_per_sequence"), getattr(baseline, f"{part}_per_sequence")) for part in PARTS]
    return all(torch.allclose(ours, theirs, rtol=0, atol=SAME_MODEL_NATS) for ours, theirs in pairs)
