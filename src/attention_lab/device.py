"""Pick the best device present: CUDA, then Apple's MPS, then the CPU."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ._checks import check_positive


def pick_device() -> torch.device:
    """CUDA when present, else MPS when present, else CPU. The chapter runs on any of them."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


@contextmanager
def cpu_threads(n: int | None) -> Iterator[None]:
    """Run a block with torch using ``n`` CPU threads, then put the old number back.

    ``None`` leaves torch's setting alone.
    """
    if n is None:
        yield
        return
    n = check_positive("threads", n)  # a clear error, not torch's, for 0 or 2.5
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
