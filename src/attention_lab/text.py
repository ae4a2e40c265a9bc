"""The text of notebook 11 and what is fitted to it before any model: vocabulary, split, batches.

* ``load_text()``: three Shakespeare plays (public domain) shipped in ``attention_lab/data``
  (see its README.md: source, transformation, sha256); read from the package, never downloaded.
* ``Vocab``: one id per character, ``encode`` / ``decode``.
* ``split``: the last 10 % held out for validation; ``get_batch``: random windows drawn with
  a ``torch.Generator``, so a seed fixes every batch.
* ``bigram_log_probs`` / ``bigram_loss``: the baseline a model must beat, counted (with
  add-one smoothing) on the same training text; ``trigram_log_probs`` / ``trigram_loss``: the
  same count over the two characters before, what fixed offsets alone can give.
* ``word_starts``: where the word of each character begins (for measuring the heads).
"""

from __future__ import annotations

from importlib.resources import files

import torch

from ._checks import check_positive
from .i18n import error_text

TEXT_FILE = "shakespeare.txt"


def load_text(name: str = TEXT_FILE) -> str:
    """The text shipped in ``attention_lab/data`` (read from the package; no download)."""
    path = files("attention_lab").joinpath("data", name)
    if not path.is_file():
        raise FileNotFoundError(
            error_text("attention_lab/data has no {name}; the chapter's text is {text}").format(
                name=repr(name), text=repr(TEXT_FILE)
            )
        )
    return path.read_text(encoding="utf-8")


class Vocab:
    """The characters of a text, sorted; id i is the i-th of them."""

    def __init__(self, text: str):
        if not isinstance(text, str) or not text:
            raise ValueError(error_text("Vocab needs a non-empty str to take its characters from"))
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    @property
    def is_space(self) -> torch.Tensor:
        """(vocab,) bool: True for the ids of whitespace characters (space, newline)."""
        return torch.tensor([c.isspace() for c in self.chars])

    def encode(self, text: str) -> torch.Tensor:
        """str -> (len(text),) int64 ids."""
        unknown = sorted(set(text) - set(self.index))
        if unknown:
            raise ValueError(
                error_text(
                    "characters {unknown} are not in this vocabulary of {size}; build the "
                    "Vocab from a text that contains them, or remove them first"
                ).format(unknown=unknown, size=len(self))
            )
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)  # (N,)

    def decode(self, ids) -> str:
        """ids (a 1-D tensor or a list of ints) -> str."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        bad = [i for i in ids if not 0 <= i < len(self)]
        if bad:
            raise ValueError(
                error_text("ids {bad} are outside [0, {size}) for this vocabulary").format(
                    bad=bad[:5], size=len(self)
                )
            )
        return "".join(self.chars[i] for i in ids)


def split(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, val): the last ``val_fraction`` of ``ids`` is held out, the rest trains."""
    if not isinstance(val_fraction, (int, float)) or not 0.0 < val_fraction < 1.0:
        raise ValueError(
            error_text(
                "val_fraction={val_fraction} must lie strictly between 0 and 1; "
                "0.1 holds out the last 10 % of the text"
            ).format(val_fraction=repr(val_fraction))
        )
    n_train = int(len(ids) * (1.0 - val_fraction))
    return ids[:n_train], ids[n_train:]  # (N_train,), (N_val,)


def get_batch(
    ids: torch.Tensor, batch_size: int, context_length: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` windows at random starts: inputs (B, T) and the next characters (B, T)."""
    B, T = (
        check_positive("batch_size", batch_size),
        check_positive("context_length", context_length),
    )
    if len(ids) < T + 1:
        raise ValueError(
            error_text(
                "the text has {n} ids, too few for windows of context_length={T} plus "
                "the next character; use context_length<={most}"
            ).format(n=len(ids), T=T, most=len(ids) - 1)
        )
    starts = torch.randint(len(ids) - T, (B,), generator=generator)  # (B,)
    offsets = torch.arange(T)  # (T,)
    x = ids[starts[:, None] + offsets]  # (B, T)
    y = ids[starts[:, None] + offsets + 1]  # (B, T)
    return x, y


def bigram_log_probs(ids: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """Counted bigram model: log P(next = b | current = a), as a (vocab, vocab) table.

    Count every pair (a, b) of neighbours in ``ids``, add ``smoothing`` to every count
    (add-one by default, so an unseen pair is unlikely but not impossible), divide each row
    by its sum. Fitted, not trained: no gradient is involved.
    """
    V = check_positive("vocab_size", vocab_size)
    _check_smoothing(smoothing)
    counts = torch.zeros(V * V, dtype=torch.float64)  # (V*V,)
    counts.index_add_(0, ids[:-1] * V + ids[1:], torch.ones(len(ids) - 1, dtype=torch.float64))
    counts = counts.view(V, V) + smoothing  # (V, V)
    return (counts / counts.sum(dim=1, keepdim=True)).log()  # (V, V)


def bigram_loss(log_probs: torch.Tensor, ids: torch.Tensor) -> float:
    """Mean cross-entropy (nats) of a bigram table on ``ids``: -log P(ids[i+1] | ids[i])."""
    return -log_probs[ids[:-1], ids[1:]].mean().item()


def trigram_log_probs(ids: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """Counted trigram model: log P(next = c | the two before = a, b), a (V, V, V) table.

    Count every triple (a, b, c) of neighbours in ``ids``, add ``smoothing`` to every count
    and divide each (a, b) row by its sum. V³ cells for about as many characters: most
    contexts are rare, so a smoothing well below 1 usually does better (choose it on text
    that is not the validation text).
    """
    V = check_positive("vocab_size", vocab_size)
    _check_smoothing(smoothing)
    counts = torch.zeros(V**3, dtype=torch.float64)  # (V*V*V,)
    triples = (ids[:-2] * V + ids[1:-1]) * V + ids[2:]  # (N - 2,)
    counts.index_add_(0, triples, torch.ones(len(triples), dtype=torch.float64))
    counts = counts.view(V, V, V) + smoothing  # (V, V, V)
    return (counts / counts.sum(dim=-1, keepdim=True)).log()  # (V, V, V)


def trigram_loss(log_probs: torch.Tensor, ids: torch.Tensor) -> float:
    """Mean cross-entropy (nats) of a trigram table on ``ids``, from the third character on:
    -log P(ids[i+2] | ids[i], ids[i+1])."""
    return -log_probs[ids[:-2], ids[1:-1], ids[2:]].mean().item()


def _check_smoothing(smoothing) -> None:
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or smoothing <= 0:
        raise ValueError(
            error_text("smoothing={smoothing} must be > 0; 1.0 is add-one smoothing").format(
                smoothing=repr(smoothing)
            )
        )


def word_starts(x: torch.Tensor, is_space: torch.Tensor) -> torch.Tensor:
    """(N, T) ids -> (N, T): the position where the word of character i begins, else -1.

    A word is a run of non-whitespace characters (``is_space`` (vocab,) bool marks the
    whitespace ids). -1 for whitespace itself, and for a word that began before the window.
    """
    space = is_space[x]  # (N, T) bool
    T = x.shape[-1]
    i = torch.arange(T).expand_as(x)  # (N, T)
    last_space = torch.where(space, i, -1).cummax(dim=-1).values  # (N, T)
    return torch.where(space | (last_space < 0), -1, last_space + 1)  # (N, T)
