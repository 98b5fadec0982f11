"""How a head is named in every table, JSON answer and figure: TransformerLens's label, L1H0 (layer 1, head 0),
where "1.0" would read as a number. The command line's --heads takes both forms."""

from __future__ import annotations

from collections.abc import Iterable


def head_label(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def heads_label(heads: Iterable[tuple[int, int]], separator: str = ",") -> str:
    """A head set: ``L0H0,L1H0``."""
    return separator.join(head_label(layer, head) for layer, head in heads)
