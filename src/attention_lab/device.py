"""Pick the best device present: CUDA, then Apple's MPS, then the CPU."""

from __future__ import annotations

import torch


def pick_device() -> torch.device:
    """CUDA when present, else MPS when present, else CPU. The chapter runs on any of them."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
