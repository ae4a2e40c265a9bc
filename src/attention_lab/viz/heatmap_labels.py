"""The tick labels of a heatmap: ``position:token`` (``3:40``, ``6:SEP``), and how big
they may be so a back row reads them (``HeadGrid`` sizes its panels and margins from these).
"""

from __future__ import annotations

from ..i18n import error_text

MIN_TICK_SIZE = 9  # points: the smallest token label a back row can still read
ALL_LABELLED_UP_TO = 16  # up to this T every row and column is labelled (panels grow)
LINE_PITCH = 1.12  # a label needs this many times its font size per row (no overlap)
CHAR_WIDTH = 0.62  # a character of a label is about this many times its font size wide


def tick_labels(tokens, T: int, task: str | None = None) -> list[str]:
    """The T tick labels of a heatmap: ``position:token`` (``"3:40"``, ``"6:SEP"``).

    ``tokens`` are the T tokens (strings, ids, or a 1-D tensor of ids); ``None`` labels by
    position only. With ``task`` (one of ``tasks.TASKS``) ids are named as
    ``tasks.token_labels`` names them (``"SEP"``, ``"c=4"``, ``"c?"``, ``"abd"``; names
    passed already, such as ``token_labels(task, ids)``, are kept). Labels
    that already start with their position (``"3:c=4"``, as the explorer and notebook 11
    make them) are kept as they are.
    """
    if tokens is None:
        return [str(i) for i in range(T)]
    if hasattr(tokens, "tolist"):  # a tensor or an array of ids
        tokens = tokens.tolist()
    tokens = list(tokens)
    if len(tokens) != T:
        raise ValueError(
            error_text("got {n} token labels for T={T} positions").format(n=len(tokens), T=T)
        )
    if task is not None and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        from ..tasks import token_labels

        names = token_labels(task, tokens)  # ids -> "SEP", "c=4", ...
    else:
        names = [str(t) for t in tokens]
    if all(name.startswith(f"{i}:") for i, name in enumerate(names)):
        return names
    return [f"{i}:{name}" for i, name in enumerate(names)]
