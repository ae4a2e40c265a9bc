"""Where the explorer runs: inside a Jupyter kernel or not, moved from the page or run by a cell.

Three small questions ``widgets.AttentionExplorer`` asks of IPython and asyncio, kept here so
the UI module holds only the page. Each answers False outside a kernel (scripts, tests).
"""

from __future__ import annotations

import asyncio


def in_kernel() -> bool:
    """Whether this runs inside a Jupyter kernel (JupyterLab, Voila, Colab), not a script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def from_the_page() -> bool:
    """Whether the code runs because a reader moved a control in the page (a widget
    message), not because a notebook cell runs: only then is there a page to show a
    progress bar in (cells that train keep their stored outputs free of progress bars)."""
    try:
        from IPython import get_ipython

        parent = get_ipython().kernel.get_parent()
        return parent["header"]["msg_type"] == "comm_msg"
    except Exception:  # noqa: BLE001 -- no kernel, or an older one: no progress bar
        return False


def later(callback) -> bool:
    """Run ``callback`` once the kernel has sent what it is doing now; False outside a kernel
    (there is no event loop to wait for: the caller runs it at once)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    loop.call_later(0.05, callback)
    return True
