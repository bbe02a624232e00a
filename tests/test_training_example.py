"""A short run of examples/train.py: loss falls and accuracy rises (MLP and LeNet)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train  # noqa: E402


@pytest.mark.parametrize("net,epochs,samples", [("mlp", 3, 256), ("lenet", 3, 192)])
def test_sgd_training_learns(net, epochs, samples):
    hist = train.train(net, epochs=epochs, batch=32, samples=samples, lr=0.05, log=lambda *_: None)
    (loss0, acc0), (loss1, acc1) = hist[0], hist[-1]
    assert loss1 < 0.7 * loss0
    assert acc1 > acc0 and acc1 > 0.5
