"""The layer-0 window read-out (Wang et al.'s rebuttal Fig. 7) against numpy's least squares, and on Theorem 4.3's
construction, whose first layer writes x_{s−1} … x_{s−n+1} into the residual stream by design."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.constructions.wang import wang_ihn
from induction_probes.circuits.tasks.gaussian.sequences import induction_head, sample_sequences
from induction_probes.probes.behaviour.window_readout import heldout_r2, window_readout


def test_heldout_r2_is_numpys_least_squares_scored_on_the_second_half():
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(40, 5, 3, generator=generator, dtype=torch.float64)
    targets = features @ torch.randn(3, 2, generator=generator, dtype=torch.float64) + torch.randn(
        40, 5, 2, generator=generator, dtype=torch.float64
    )
    f, t = features.numpy().reshape(40, 5, 3), targets.numpy().reshape(40, 5, 2)
    train_x = np.hstack([f[:20].reshape(-1, 3), np.ones((100, 1))])
    test_x = np.hstack([f[20:].reshape(-1, 3), np.ones((100, 1))])
    beta = np.linalg.lstsq(train_x, t[:20].reshape(-1, 2), rcond=None)[0]
    actual = t[20:].reshape(-1, 2)
    expected = 1 - ((actual - test_x @ beta) ** 2).sum() / ((actual - actual.mean(0)) ** 2).sum()
    assert heldout_r2(features, targets) == pytest.approx(expected, rel=1e-10)
    assert 0.2 < expected < 0.95  # the noise makes it a real fit, neither perfect nor empty


def test_an_empty_block_in_the_residual_stream_does_not_spoil_the_fit():
    tokens = torch.randn(30, 4, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    resid = torch.cat([tokens, torch.zeros(30, 4, 3, dtype=torch.float64)], dim=-1)  # a block nothing wrote yet
    assert heldout_r2(resid, tokens[..., 1:]) == pytest.approx(1.0, abs=1e-12)


def test_the_construction_writes_exactly_the_window_into_layer_0():
    generator = torch.Generator().manual_seed(3)
    W = 0.5 * torch.randn(4, 4, generator=generator, dtype=torch.float64)
    x = sample_sequences(400, 14, 2, generator=generator)
    model = load_construction(*wang_ihn(2, 3, 11, W, 14))
    readout = window_readout(model, x, induction_head(x, 3, W), order=3)
    r2 = readout["window_r2"]
    assert len(r2) == 4
    assert min(r2[:3]) > 0.999  # x_s itself and the two it copies (sum-of-exponentials error ~1e-4 here)
    assert abs(r2[3]) < 0.02  # x_{s-3}: independent of what layer 0 wrote; held-out R² of noise is ~0 ± 0.01
    assert readout["target_r2_after_layer0"] < 0.2  # the target needs layer 1's attention over the context
