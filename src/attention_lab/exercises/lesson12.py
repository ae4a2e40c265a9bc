"""Lesson 12 · attention as today's LLMs run it (notebooks/12_attention_in_todays_llms.ipynb):
each key/value head expanded to its group of query heads, rotary positions applied to q and k
at the positions a cache says, and the bytes a KV cache holds, each checked against the
library (``repeat_kv``, ``rope_cos_sin``/``apply_rope``, ``cache_bytes``) or the maths written
out here.
"""

from __future__ import annotations

import torch

from ..i18n import N_, _
from ..kv_cache import CacheShape, cache_bytes
from .core import Wrong, answer_number, answer_tensor, call, checker, close

# --- exercise 12.1: each key/value head for its group of query heads -------------------------


def _grouped(kv: torch.Tensor, n_rep: int, *, tiled: bool = False) -> torch.Tensor:
    """(B, n_kv, T, d) -> (B, n_kv * n_rep, T, d), written as a loop over query heads: query
    head h reads kv head h // n_rep (``tiled``: h % n_kv, the mistake)."""
    n_kv = kv.shape[1]
    heads = [kv[:, h % n_kv if tiled else h // n_rep] for h in range(n_kv * n_rep)]
    return torch.stack(heads, dim=1)  # (B, n_kv * n_rep, T, d)


@checker("12", N_("return one (B, n_kv * n_rep, T, d_head) tensor"))
def check_grouped_kv(fn) -> str:
    """``fn(kv, n_rep) -> (B, n_kv * n_rep, T, d_head)``: kv (B, n_kv, T, d_head) with each
    key/value head repeated for its group: query heads 0 .. n_rep - 1 read kv head 0, the next
    n_rep kv head 1, and so on (Llama's ``repeat_kv``)."""
    for B, n_kv, T, d, n_rep in (
        (2, 2, 5, 4, 3),
        (1, 4, 3, 2, 2),
        (2, 1, 4, 3, 4),
        (2, 3, 4, 2, 1),
    ):
        kv = torch.randn(B, n_kv, T, d)  # (B, n_kv, T, d_head)
        want = _grouped(kv, n_rep)  # (B, H, T, d_head)
        where = _("with kv of shape {shape} and n_rep={n_rep}").format(
            shape=(B, n_kv, T, d), n_rep=n_rep
        )
        got = call(fn, kv.clone(), n_rep)
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else None
        if shape == (B, n_kv, n_rep, T, d) and n_rep > 1:
            raise Wrong(
                _(
                    "{where}, you returned shape {shape}: the groups are still a dimension of "
                    "their own"
                ).format(where=where, shape=shape),
                _("merge n_kv and n_rep into one head axis: .reshape(B, n_kv * n_rep, T, d_head)"),
            )
        if shape == (B, n_kv, T * n_rep, d) and n_rep > 1:
            raise Wrong(
                _("{where}, you returned shape {shape}: you repeated along the time axis").format(
                    where=where, shape=shape
                ),
                _("repeat the heads, dim=1, not the positions"),
            )
        if shape == (B, n_kv, T, d * n_rep) and n_rep > 1:
            raise Wrong(
                _("{where}, you returned shape {shape}: you repeated along the features").format(
                    where=where, shape=shape
                ),
                _("repeat the heads, dim=1, not the features"),
            )
        got = answer_tensor(got, _("the keys {where}").format(where=where), tuple(want.shape))
        if close(got, want):
            continue
        if close(got, _grouped(kv, n_rep, tiled=True)):
            raise Wrong(
                _(
                    "{where}, you tiled the heads (kv 0, 1, ..., 0, 1, ...), as .repeat does: "
                    "query head 1 reads kv head 1, but it belongs to kv head 0's group"
                ).format(where=where),
                _(
                    "repeat each head in place (0, 0, 0, 1, 1, 1): x.repeat_interleave(n_rep, "
                    "dim=1), or x[:, :, None].expand(...).reshape(...)"
                ),
            )
        bad = next(h for h in range(n_kv * n_rep) if not close(got[:, h], want[:, h]))
        raise Wrong(
            _("{where}, query head {h} does not get kv head {kv}").format(
                where=where, h=bad, kv=bad // n_rep
            ),
            _("query head h reads kv head h // n_rep"),
        )
    return _(
        "each key/value head serves its group of n_rep query heads, in order, as Llama's "
        "repeat_kv does"
    )


# --- exercise 12.2: rotary positions on q and k ----------------------------------------------


def _rotated(
    x: torch.Tensor,
    positions: torch.Tensor,
    base: float = 10_000.0,
    *,
    layout: str = "half",
    direction: int = 1,
    per_feature: bool = False,
) -> torch.Tensor:
    """x (..., T, d) turned by RoPE at ``positions`` (T,), in float64, written from the pairs:
    ``layout="half"`` pairs feature i with i + d/2 (Hugging Face's), ``"interleaved"`` feature
    2i with 2i + 1 (RoFormer's); pair i turns by position * base ** (-2i / d) (``per_feature``:
    base ** (-i / d), the mistake); ``direction=-1`` turns the other way."""
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)  # (d/2,): the pairs
    theta = base ** (-(i if per_feature else 2 * i) / d)  # (d/2,)
    angle = direction * positions.double()[:, None] * theta[None, :]  # (T, d/2)
    cos, sin = angle.cos(), angle.sin()
    x = x.double()
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]  # pair i: (a_i, b_i)
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)  # (..., T, d)
    a, b = x[..., 0::2], x[..., 1::2]  # pair i: (x_2i, x_2i+1)
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)  # (..., T, d)


@checker("12", N_("return (q, k, v): three tensors of the shapes you were given"))
def check_rotary_qkv(fn) -> str:
    """``fn(q, k, v, start) -> (q, k, v)``: q, k, v (B, H, T, d_head) of T new tokens at
    positions start .. start + T - 1 (start: the tokens a cache already holds); q and k turned
    by RoPE in the rotate-half layout (base 10,000), v unchanged."""
    for B, H, T, d, start in ((2, 2, 5, 8, 0), (1, 3, 4, 16, 7), (2, 2, 1, 4, 12)):
        q, k, v = (torch.randn(B, H, T, d) for _part in "qkv")  # (B, H, T, d_head) each
        positions = torch.arange(start, start + T)  # (T,)
        want = (_rotated(q, positions), _rotated(k, positions), v.double())
        where = _("for {T} token(s) at positions {first} to {last}, d_head={d}").format(
            T=T, first=start, last=start + T - 1, d=d
        )
        answer = call(fn, q.clone(), k.clone(), v.clone(), start)
        if not (isinstance(answer, (tuple, list)) and len(answer) == 3):
            raise Wrong(
                _("{where}, your function returned a {type}, not (q, k, v)").format(
                    where=where, type=type(answer).__name__
                ),
                _("return q, k, v: all three, v as it came"),
            )
        got = [
            answer_tensor(t, _("{name} {where}").format(name=name, where=where), (B, H, T, d))
            for name, t in zip(("q", "k", "v"), answer)
        ]
        if all(close(g, w) for g, w in zip(got, want)):
            continue
        if not close(got[2], want[2]):
            if close(got[2], _rotated(v, positions)):
                raise Wrong(
                    _("{where}, you turned v too").format(where=where),
                    _(
                        "RoPE turns q and k only: a score q·k then depends on the offset; the "
                        "values carry content, not position, and stay as they are"
                    ),
                )
            raise Wrong(
                _("{where}, v changed").format(where=where), _("return v as it came, unchanged")
            )
        for name, g, x in (("q", got[0], q), ("k", got[1], k)):
            if close(g, x):
                raise Wrong(
                    _("{where}, {name} is not turned at all").format(where=where, name=name),
                    _("turn both q and k; the score of m and n then depends on m - n only"),
                )
        variants = (
            (
                dict(positions=torch.arange(T)),
                _(
                    "{where}: you turned them for positions 0 to {last0}, as if no token came "
                    "before; with a cache they sit at start, start + 1, ..."
                ),
                _("positions = torch.arange(start, start + T)"),
            ),
            (
                dict(positions=torch.arange(start + 1, start + T + 1)),
                _("{where}: your positions are one too far: {first1} to {last1}"),
                _("the first new token sits at position start, the number of tokens before it"),
            ),
            (
                dict(positions=positions, layout="interleaved"),
                _(
                    "{where}: you turned neighbouring features together (2i with 2i + 1, "
                    "RoFormer's interleaved layout); here pair i is feature i with i + d_head/2"
                ),
                _(
                    "split the last axis in halves: x1, x2 = x.chunk(2, dim=-1); "
                    "rotate_half = (-x2, x1)"
                ),
            ),
            (
                dict(positions=positions, direction=-1),
                _("{where}: you turned the pairs the other way (by minus the angle)"),
                _("x * cos + rotate_half(x) * sin, with rotate_half(x) = cat(-x2, x1)"),
            ),
            (
                dict(positions=positions, per_feature=True),
                _(
                    "{where}: your angles use base ** (-i / d_head); pair i turns by "
                    "base ** (-2i / d_head)"
                ),
                _("theta = base ** (-torch.arange(0, d_head, 2) / d_head), one per pair"),
            ),
        )
        for options, message, hint in variants:
            if all(close(g, _rotated(x, **options)) for g, x in zip(got[:2], (q, k))):
                raise Wrong(
                    message.format(where=where, last0=T - 1, first1=start + 1, last1=start + T),
                    hint,
                )
        wrong = "q" if not close(got[0], want[0]) else "k"
        raise Wrong(
            _("{where}, {name} is not q or k turned by RoPE at these positions").format(
                where=where, name=wrong
            ),
            _(
                "angles = positions[:, None] * base ** (-2i / d_head), repeated for both halves; "
                "x * cos + rotate_half(x) * sin"
            ),
        )
    return _(
        "q and k turned at the positions start, start + 1, ... in the rotate-half layout; "
        "v left as it is"
    )


# --- exercise 12.3: the bytes a KV cache holds -----------------------------------------------


def _cache_variants(n_layers, n_heads, n_kv_heads, d_head, T, size, window):
    """{mistake: bytes} for one case, ``size`` the bytes of one number."""
    kept = T if window is None else min(T, window)
    one = n_kv_heads * d_head * kept * size  # K of one layer
    out = {
        "no 2": n_layers * one,
        "query heads": n_layers * 2 * n_heads * d_head * kept * size,
        "bits": n_layers * 2 * one * 8,
        "float32": n_layers * 2 * n_kv_heads * d_head * kept * 4,
        "one layer": 2 * one,
    }
    if window is not None:
        out["window ignored"] = n_layers * 2 * n_kv_heads * d_head * T * size
        out["window always"] = n_layers * 2 * n_kv_heads * d_head * window * size
    return out


@checker("12", N_("return one int: the bytes the cache holds"))
def check_kv_cache_size(fn) -> str:
    """``fn(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None) -> int``: the bytes
    the keys and values of T tokens take in every layer, each number stored in ``dtype``; with
    a ``window`` every layer keeps only its last ``window`` tokens."""
    cases = (
        (32, 32, 8, 128, 8192, torch.bfloat16, None),  # Llama 3.1 8B, 8k tokens
        (4, 8, 2, 16, 100, torch.float32, 64),
        (4, 8, 2, 16, 40, torch.float32, 64),
        (2, 4, 4, 8, 10, torch.float16, None),
        (28, 28, 4, 128, 131_072, torch.bfloat16, None),
        (3, 6, 1, 8, 9, torch.float32, 9),
    )
    for n_layers, n_heads, n_kv, d_head, T, dtype, window in cases:
        size = torch.empty((), dtype=dtype).element_size()
        shape = CacheShape(n_layers=n_layers, n_kv_heads=n_kv, d_head=d_head, window=window)
        want = cache_bytes(shape, T, bytes_per_element=size)
        where = _(
            "for {L} layers, {H} query heads, {kv} key/value heads of {d}, {T} tokens in {dtype}"
        ).format(L=n_layers, H=n_heads, kv=n_kv, d=d_head, T=T, dtype=str(dtype).split(".")[-1])
        if window is not None:
            where = _("{where}, window {window}").format(where=where, window=window)
        answer = call(fn, n_layers, n_heads, n_kv, d_head, T, dtype, window=window)
        got = answer_number(answer, where, _("return the bytes as an int"))
        if got == want:
            continue
        mistakes = {
            "no 2": (
                _("{where}, you count {got:,.0f} bytes, half of {want:,}: only the keys"),
                _("every token keeps a key and a value: a factor 2"),
            ),
            "query heads": (
                _(
                    "{where}, you count {got:,.0f} bytes: you counted the {H} query heads; the "
                    "cache holds the {kv} key/value heads"
                ),
                _("use n_kv_heads: query heads share their group's key and value"),
            ),
            "bits": (
                _("{where}, you count {got:,.0f}: that is bits, 8 times the bytes"),
                _("bytes per number: torch.empty((), dtype=dtype).element_size()"),
            ),
            "float32": (
                _(
                    "{where}, you count {got:,.0f}: 4 bytes a number, but {dtype} takes "
                    "{size} bytes"
                ),
                _("bytes per number: torch.empty((), dtype=dtype).element_size()"),
            ),
            "one layer": (
                _("{where}, you count {got:,.0f}: one layer's cache; each of the {L} has its own"),
                _("multiply by n_layers"),
            ),
            "window ignored": (
                _(
                    "{where}, you count {got:,.0f}: all {T} tokens, but a sliding layer keeps "
                    "only the last {window}"
                ),
                _("a layer with a window keeps min(T, window) tokens"),
            ),
            "window always": (
                _("{where}, you count {got:,.0f}: {window} tokens, but only {T} came so far"),
                _("a layer with a window keeps min(T, window) tokens"),
            ),
        }
        values = _cache_variants(n_layers, n_heads, n_kv, d_head, T, size, window)
        for name, value in values.items():
            if value != want and got == value:
                message, hint = mistakes[name]
                raise Wrong(
                    message.format(
                        where=where,
                        got=got,
                        want=want,
                        H=n_heads,
                        kv=n_kv,
                        L=n_layers,
                        T=T,
                        window=window,
                        dtype=str(dtype).split(".")[-1],
                        size=size,
                    ),
                    hint,
                )
        raise Wrong(
            _("{where}, you count {got:,.0f} bytes; the cache holds {want:,}").format(
                where=where, got=got, want=want
            ),
            _("n_layers x 2 (K and V) x n_kv_heads x d_head x min(T, window) x bytes per number"),
        )
    return _(
        "layers x 2 x key/value heads x d_head x tokens kept x bytes per number: Llama 3.1 8B "
        "keeps 1 GiB for 8k tokens in bfloat16"
    )
