"""`english-words`: how much English a reader of the Chinese notebooks still sees printed.

Counts the English words (two or more Latin letters, not part of an identifier or a call) in
the stdout stream outputs of notebooks/zh-CN/*.ipynb, less
- the words in ALLOWED: names and units that stay as they are in the Chinese text too (see
  i18n/glossary.tsv), and
- the identifiers of the notebook's own code (``code_words``: names and attributes, not
  strings): output that names a variable the reader is looking at (``out``, ``qkv``,
  ``mask``) quotes code, not prose.
What is left is English prose a Chinese reader would have to read; the test's budget
(tests/build/test_translations.py) lists per notebook what may remain, and why.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from pathlib import Path

from .common import LANG_DIR, read_notebook

WORD = re.compile(r"(?<![\w.])[A-Za-z]{2,}(?![\w(])")

# Words a Chinese reader is meant to see in English; each with its reason.
ALLOWED = {
    # Python and PyTorch values and reprs as they print: tensor([...]), Linear(..., bias=True),
    # LayerNorm(..., eps=1e-05), Dropout(p=0.0, inplace=False), dtypes and devices
    "True", "False", "None", "inf", "nan", "tensor", "dtype", "device", "torch", "bias", "eps",
    "inplace", "float32", "float64", "bool", "int64", "cpu", "meta", "requires_grad", "nn",
    # terms the glossary (i18n/glossary.tsv) keeps in English
    "softmax", "token", "tokens", "dropout", "buffer", "epoch", "SDPA", "SEP", "MLP", "LM", "id",
    # units and notation
    "MiB", "ms", "nat", "GFLOP", "ln", "log", "exp", "var", "sqrt", "max", "sum", "grad", "dL",
    "dq", "ds",  # |grad|, |dL/dq|: maths written as code
    # names of classes, functions and errors, printed as code (a reader searches for them)
    "CausalAttention", "SingleHeadAttention", "MultiHeadAttention", "MultiHeadSelfAttention",
    "TinyLM", "CharLM", "GPT", "NotImplementedError", "attend", "masked_fill", "is_causal",
    "Adam", "AdamW",  # the optimisers, torch.optim.Adam(W), named as the prose names them
    # the tasks' and mask kinds' names, as the code spells them (the glossary keeps them:
    # “previous”任务, mask_kind='causal')
    "copy", "previous", "repeat", "lookup", "trigram", "causal", "sliding", "none",
}  # fmt: skip


def code_words(nb: dict) -> set[str]:
    """The identifiers of the notebook's code cells (names, attributes, keywords), never the
    words of its strings or comments."""
    words: set[str] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = [" " if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
        for tok in tokens:
            if tok.type == tokenize.NAME:
                words.add(tok.string)
    return words


def english_words(nb: dict) -> Counter:
    """The English words in a notebook's stdout stream outputs, ALLOWED ones and the words
    of the notebook's own code excluded."""
    allowed = ALLOWED | code_words(nb)
    found: Counter = Counter()
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                text = output["text"]
                text = text if isinstance(text, str) else "".join(text)
                found.update(w for w in WORD.findall(text) if w not in allowed)
    return found


def english_word_counts(root: Path, notebooks: list[Path]) -> dict[str, Counter]:
    """Per Chinese notebook (by name), its English words; notebooks not built are left out."""
    out = {}
    for path in notebooks:
        target = root / "notebooks" / LANG_DIR / path.name
        if target.exists():
            out[path.name] = english_words(read_notebook(target))
    return out


def report(root: Path, notebooks: list[Path], top: int = 8) -> list[str]:
    counts = english_word_counts(root, notebooks)
    lines = []
    for name, words in counts.items():
        common = ", ".join(f"{w} {n}" for w, n in words.most_common(top))
        tail = f" ({common})" if common else ""
        lines.append(f"{name}: {sum(words.values())} English words{tail}")
    total = sum(sum(w.values()) for w in counts.values())
    everywhere = sum(counts.values(), Counter())
    lines.append(
        f"total: {total} English words in stdout; most common: "
        + ", ".join(f"{w} {n}" for w, n in everywhere.most_common(2 * top))
    )
    return lines
