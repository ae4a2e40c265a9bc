"""Input checks shared by every module: a clear message that names the value and the fix.

Used by all the attention modules (notebooks 02-07), ``functional.attention`` and ``TinyLM``
(08), so a learner who passes the wrong shape or dtype is told what went wrong in words, not
by a matmul error deep inside PyTorch. Each check is one line where it is used, so the
modules read as the maths.
"""

from __future__ import annotations

import math
import numbers
import operator

import torch

from .i18n import error_text


def as_size(value) -> int | None:
    """``value`` as a Python int when it is an integer of any kind (``operator.index``), else None.

    Python ints, NumPy integers and 0-d integer tensors are sizes; bools and floats are not.
    """
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def heads_divide(d_model: int, n_heads: int) -> bool:
    """Whether n_heads heads split d_model evenly: the rule ``check_heads`` enforces, and the
    one test of it (the explorer offers only the widths that pass it)."""
    return d_model % n_heads == 0


def kv_heads_divide(n_heads: int, n_kv_heads: int) -> bool:
    """Whether n_kv_heads key/value heads serve equal groups of the n_heads query heads: the
    rule ``check_kv_heads`` enforces, and the one test of it (the explorer offers only the
    counts that pass it)."""
    return n_heads % n_kv_heads == 0


def check_heads(d_model: int, n_heads: int) -> int:
    """Return d_head = d_model // n_heads, or raise a ValueError that says how to fix it."""
    n_heads, d_model = check_positive("n_heads", n_heads), check_positive("d_model", d_model)
    if not heads_divide(d_model, n_heads):
        lower = (d_model // n_heads) * n_heads
        if lower:
            message = error_text(
                "d_model={d_model} is not divisible by n_heads={n_heads}; pick d_model as a "
                "multiple of n_heads (for example d_model={lower} or {higher})"
            )
        else:
            message = error_text(
                "d_model={d_model} is not divisible by n_heads={n_heads}; pick d_model as a "
                "multiple of n_heads (for example d_model={n_heads})"
            )
        raise ValueError(
            message.format(d_model=d_model, n_heads=n_heads, lower=lower, higher=lower + n_heads)
        )
    return d_model // n_heads


def check_kv_heads(n_heads: int, n_kv_heads: int | None) -> int:
    """n_kv_heads (None means n_heads: every query head its own keys and values), or a
    ValueError unless it divides n_heads (grouped-query attention, notebook
    12_attention_in_todays_llms)."""
    if n_kv_heads is None:
        return n_heads
    n_kv = check_positive("n_kv_heads", n_kv_heads)
    if not kv_heads_divide(n_heads, n_kv):
        divisors = ", ".join(str(d) for d in range(1, n_heads + 1) if kv_heads_divide(n_heads, d))
        raise ValueError(
            error_text(
                "n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}; each key/value "
                "head serves a group of n_heads // n_kv_heads query heads, so pick one of "
                "{divisors} (1: multi-query attention, {n_heads}: plain multi-head)"
            ).format(n_heads=n_heads, n_kv_heads=n_kv, divisors=divisors)
        )
    return n_kv


def check_rope_base(base) -> float:
    """RoPE's base as a float > 1, or a ValueError with the usual values."""
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not 1 < base < math.inf:
        raise ValueError(
            error_text(
                "rope_base={base} must be a number > 1: the slowest pair turns by "
                "position / rope_base; Llama 2 uses 10000.0, Llama 3 500000.0"
            ).format(base=repr(base))
        )
    return float(base)


EXAMPLES = {"n_heads": 4, "d_model": 32}


def check_positive(name: str, value) -> int:
    """Return ``value`` as an int >= 1, or raise a ValueError that names it and the fix."""
    size = as_size(value)
    if size is None or size < 1:
        if isinstance(value, float) and value.is_integer() and value >= 1:
            message = error_text("{name}={value} must be a whole number >= 1; pass {name}={whole}")
        else:
            message = error_text(
                "{name}={value} must be a whole number >= 1; pass a positive int, e.g. "
                "{name}={example}"
            )
        whole = int(value) if isinstance(value, float) and value.is_integer() else None
        raise ValueError(
            message.format(name=name, value=repr(value), whole=whole, example=EXAMPLES.get(name, 8))
        )
    return size


def check_dropout(p: float) -> float:
    if not isinstance(p, (int, float)) or not 0.0 <= float(p) < 1.0:
        raise ValueError(
            error_text(
                "dropout={p} must be in [0, 1): it is the probability of dropping an attention "
                "weight; use 0.0 to switch dropout off"
            ).format(p=repr(p))
        )
    return float(p)


def check_float_tensor(x: torch.Tensor, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            error_text(
                "{name} must be a torch.Tensor, got {type}; "
                "convert it with torch.as_tensor({name}, dtype=torch.float32)"
            ).format(name=name, type=type(x).__name__)
        )
    if not torch.is_floating_point(x):
        raise TypeError(
            error_text(
                "{name} has dtype {dtype}, but attention needs floating-point vectors; "
                "token ids go through an nn.Embedding first (or call .float() on real-valued data)"
            ).format(name=name, dtype=x.dtype)
        )


def check_input(x: torch.Tensor, d_in: int, context_length: int | None = None) -> tuple[int, int]:
    """Check that x is a float (B, T, d_in) tensor that fits the context; return (B, T)."""
    check_float_tensor(x)
    if x.dim() != 3:
        if x.dim() == 2:
            message = error_text(
                "x has shape {shape} (rank {rank}), but attention modules take "
                "(B, T, D) = (batch, time, features); add a batch dimension with x.unsqueeze(0)"
            )
        else:
            message = error_text(
                "x has shape {shape} (rank {rank}), but attention modules take "
                "(B, T, D) = (batch, time, features); reshape it to rank 3"
            )
        raise ValueError(message.format(shape=tuple(x.shape), rank=x.dim()))
    B, T, D = x.shape
    if D != d_in:
        raise ValueError(
            error_text(
                "x has {D} features in its last dimension, but this module was built for "
                "{d_in}; project the input to {d_in} features or build the module with that size"
            ).format(D=D, d_in=d_in)
        )
    if context_length is not None and T > context_length:
        raise ValueError(
            error_text(
                "x has T={T} positions, more than context_length={context_length}; build the "
                "module with context_length>={T} or feed a shorter sequence"
            ).format(T=T, context_length=context_length)
        )
    return B, T


def check_mask(mask: torch.Tensor, t_q: int, t_k: int) -> None:
    """A mask is bool, True = blocked, and broadcastable to (..., t_q, t_k)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            error_text("mask must be a torch.Tensor of dtype bool, got {type}").format(
                type=type(mask).__name__
            )
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            error_text(
                "mask has dtype {dtype}; it must be torch.bool with True = blocked "
                "(build one with attention_lab.causal_mask, or convert with mask.bool())"
            ).format(dtype=mask.dtype)
        )
    if mask.dim() < 2 or mask.shape[-2] not in (1, t_q) or mask.shape[-1] not in (1, t_k):
        raise ValueError(
            error_text(
                "mask has shape {shape}, but the scores are (..., {t_q}, {t_k}); "
                "slice it with mask[:{t_q}, :{t_k}] or build it for this length"
            ).format(shape=tuple(mask.shape), t_q=t_q, t_k=t_k)
        )


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Float tensors, q and k of the same width d_k, one value per key (``attention``)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(t, name)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            error_text(
                "q has d_k={q_width} but k has d_k={k_width}; queries and keys must have "
                "the same last dimension to take their dot product"
            ).format(q_width=q.shape[-1], k_width=k.shape[-1])
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            error_text(
                "k has {k_positions} positions but v has {v_positions}; each key needs one value"
            ).format(k_positions=k.shape[-2], v_positions=v.shape[-2])
        )


def check_scores_mask(mask: torch.Tensor, scores_shape: torch.Size) -> None:
    """``check_mask`` for scores of ``scores_shape`` (..., T_q, T_k), and the mask's leading
    dimensions must broadcast to the scores' without growing them."""
    check_mask(mask, scores_shape[-2], scores_shape[-1])
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        lead = tuple(scores_shape[:-2])
        raise ValueError(
            error_text(
                "mask has shape {shape}, which does not broadcast to the scores "
                "{scores}; pass a ({t_q}, {t_k}) mask, or "
                "give it leading dimensions of size 1 or equal to {lead}"
            ).format(
                shape=tuple(mask.shape),
                scores=tuple(scores_shape),
                t_q=scores_shape[-2],
                t_k=scores_shape[-1],
                lead=lead,
            )
        )


def check_token_ids(
    idx: torch.Tensor, vocab_size: int, context_length: int, model: str = "TinyLM"
) -> None:
    """The input of a language model (``TinyLM``, ``CharLM``): integer ids (B, T), int64 or
    int32 (what ``nn.Embedding`` takes), with T <= ``context_length`` and every id in
    [0, ``vocab_size``). ``model`` names the class in the messages.

    The one place both models check their ids, and the only check a forward runs on them.
    Dtype, rank and T are read from the tensor's metadata: free. The range needs the ids'
    values, and reading a value on the host is a sync with the device (on a GPU the Python
    thread waits for every queued kernel). The check pays exactly one: one pass over the
    ids (``torch.aminmax``) and one read of its two numbers (``tolist``), which are also
    the numbers the message quotes. (Two ``int()`` reads would be two syncs; a fused
    ``((idx < 0) | (idx >= V)).any()`` is one sync too, but three more kernels, and the
    message would need another read.) A bad id on a GPU would otherwise end in a device-side
    assert that leaves the CUDA context unusable: worth one sync. Under ``torch.compile``
    the range check is skipped (the read would break the graph), and a bad id fails in the
    embedding, with PyTorch's own error.
    """
    if not isinstance(idx, torch.Tensor):
        raise TypeError(
            error_text(
                "{model} takes token ids as an int64 tensor (B, T), got {type}; "
                "make one with torch.tensor(ids)"
            ).format(model=model, type=type(idx).__name__)
        )
    if idx.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            error_text(
                "{model} takes token ids as an int64 tensor (B, T), got {dtype}; "
                "convert whole-number ids with idx.long() ({model} embeds the ids itself)"
            ).format(model=model, dtype=idx.dtype)
        )
    if idx.dim() != 2:
        if idx.dim() == 1:
            message = error_text(
                "idx has shape {shape} (rank {rank}), but {model} takes (B, T) "
                "token ids; add a batch dimension with idx.unsqueeze(0)"
            )
        else:
            message = error_text(
                "idx has shape {shape} (rank {rank}), but {model} takes (B, T) token ids; "
                "reshape it"
            )
        raise ValueError(message.format(shape=tuple(idx.shape), rank=idx.dim(), model=model))
    T = idx.shape[1]
    if T > context_length:
        raise ValueError(
            error_text(
                "idx has T={T} positions, more than context_length={context_length}; "
                "feed the last ones, idx[:, -{context_length}:], or build {model} with "
                "context_length>={T}"
            ).format(T=T, context_length=context_length, model=model)
        )
    if torch.compiler.is_compiling() or idx.numel() == 0:
        return
    low, high = torch.stack(torch.aminmax(idx)).tolist()  # one pass, one read to the host
    if 0 <= low and high < vocab_size:
        return
    if low < 0:
        message = error_text(
            "token ids must lie in [0, {vocab_size}) for vocab_size={vocab_size}; "
            "got values from {low} to {high}; "
            "ids are row numbers of the embedding table and cannot be negative"
        )
    else:
        message = error_text(
            "token ids must lie in [0, {vocab_size}) for vocab_size={vocab_size}; "
            "got values from {low} to {high}; encode with the vocabulary {model} was built "
            "for, or build {model} with vocab_size>={needed}"
        )
    raise ValueError(
        message.format(vocab_size=vocab_size, low=low, high=high, needed=high + 1, model=model)
    )
