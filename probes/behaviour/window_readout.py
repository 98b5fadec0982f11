"""What a Gaussian-task model's first layer writes into the residual stream, read back by linear maps: for each
distance i = 0 … n, how much of the token x_{s−i} a least-squares map recovers from the residual stream at position
s after layer 0 (held-out R²), and how much of the target a map recovers there at the last position.

Wang et al.'s rebuttal Fig. 7 says that layer 1 of a trained GIH_n model extracts the window of the last n − 1
tokens and layer 2 produces the output, as in Theorem 4.3's construction (layer 1 copies x_{s−i} into block i + 1
for i = 1 … n − 1). Then the tokens at distances 0 … n − 1 read back with R² near 1, the token at distance n
(which IH_n never uses) near 0, and the target not at all before layer 2.

The maps are fitted on the first half of the probe sequences and scored on the second (R² = 1 − SSE / SST over
every coordinate of the held-out tokens), in float64.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput

if TYPE_CHECKING:
    from induction_probes.circuits.models.model import HookedTransformer

AFTER_LAYER0 = "blocks.0.hook_resid_post"


class WindowReadout(TypedDict):
    """:func:`window_readout`'s two results, by the names a probe's fields take them under."""

    window_r2: list[float]
    target_r2_after_layer0: float


def heldout_r2(features: Float[Tensor, "batch ... width"], targets: Float[Tensor, "batch ... d"]) -> float:
    """R² on the second half of the sequences (dim 0) of the least-squares map with intercept fitted on the first."""
    half = features.shape[0] // 2
    if half < 1:
        raise BadInput("a held-out R² needs at least two sequences")

    def flat(tensor: Tensor) -> Tensor:
        return tensor.reshape(-1, tensor.shape[-1]).double()

    def design(tensor: Tensor) -> Tensor:
        return torch.cat([flat(tensor), torch.ones(flat(tensor).shape[0], 1, dtype=torch.float64)], dim=1)

    # gelsd (by SVD): the residual stream has empty blocks (zero columns), on which torch's default driver,
    # gelsy, returned a wrong solution (a max error of 3 on an exactly solvable problem, measured)
    weights = torch.linalg.lstsq(design(features[:half]), flat(targets[:half]), driver="gelsd").solution
    predicted, actual = design(features[half:]) @ weights, flat(targets[half:])
    residual = ((actual - predicted) ** 2).sum()
    spread = ((actual - actual.mean(0)) ** 2).sum()
    return (1.0 - residual / spread).item()


def window_readout(
    model: HookedTransformer, x: Float[Tensor, "batch pos d"], targets: Float[Tensor, "batch d"], order: int
) -> WindowReadout:
    """``window_r2``: the held-out R² of x_{s−i} from the residual stream after layer 0 at positions s ≥ n, for
    i = 0 … n (n = ``order``); ``target_r2_after_layer0``: that of the target from it at the last position.
    ``model``: our HookedTransformer, the model class that reads vectors (``input_type="vectors"``) such as ``x``."""
    with torch.no_grad():
        _, cache = model.run_with_cache(x.to(model_device(model), model.cfg.torch_dtype), names_filter=AFTER_LAYER0)
    resid = cache[AFTER_LAYER0].cpu().double()
    length = x.shape[1]
    window = [heldout_r2(resid[:, order:], x[:, order - i : length - i]) for i in range(order + 1)]
    return {"window_r2": window, "target_r2_after_layer0": heldout_r2(resid[:, -1], targets)}
