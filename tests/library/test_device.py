"""device.py: the device the chapter runs on."""

from __future__ import annotations

import pytest
import torch

from attention_lab import TinyLM, pick_device


@pytest.mark.skipif(
    torch.cuda.is_available() or torch.backends.mps.is_available(),
    reason="an accelerator is present: pick_device picks it",
)
def test_pick_device_returns_the_cpu_on_a_machine_without_an_accelerator():
    device = pick_device()
    assert device == torch.device("cpu")
    assert TinyLM().to(device)(torch.zeros(1, 3, dtype=torch.long)).device == device
