"""The summary sheet's numbers, every one computed by the library (no words: those are in
tools/templates/summary_sheet.html.j2 and its catalogues; tools/summary_sheet.py renders it).

The shape walk is recorded from a real forward pass of ``attention_lab.MultiHeadSelfAttention``
(and checked equal to the block's own output), the parameter counts come from building the
block and counting, each mask convention is found by running that API with ``causal_mask(T)``
and seeing whether True blocked or allowed, the cost table uses ``attention_lab.cost``, and the
induction box finds its key with notebook 10's rule (``after_previous_occurrence``) and its
baseline with ``in_context_guess``, and the KV cache box of lesson 12 hands published models'
sizes (``attention_lab.published``) to the library's ``cache_bytes``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab.published import PUBLISHED_MODELS

# The chapter's sizes: TinyLM of notebook 08 (d_model=32, n_heads=4, context_length=12),
# a batch of two sequences as in notebooks 05-07; and GPT-2 small for scale.
CHAPTER = {"B": 2, "T": 12, "D": 32, "H": 4}
GPT2 = {"D": 768, "H": 12, "T": 1024}
MASK_T = 4  # the mask conventions are found with causal_mask(MASK_T)


def shape_walk(B: int, T: int, D: int, H: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """(step, code, shape) of every tensor in one forward pass of the fused block."""
    from attention_lab.functional import attention
    from attention_lab.fused import MultiHeadSelfAttention
    from attention_lab.multihead import merge_heads, split_heads

    torch.manual_seed(0)
    block = MultiHeadSelfAttention(D, H, context_length=T).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    steps = [("input", "x", tuple(x.shape))]
    with torch.no_grad():
        qkv = block.qkv(x)  # (B, T, 3D)
        steps.append(("project once", "qkv = block.qkv(x)", tuple(qkv.shape)))
        q, k, v = (split_heads(t, H) for t in qkv.split(D, dim=-1))  # 3 x (B, H, T, d_head)
        steps.append(
            ("split Q, K, V into heads", "split_heads(t, H), t in qkv.split(D, -1)", tuple(q.shape))
        )
        ctx, weights = attention(q, k, v, block.mask[:T, :T])  # (B, H, T, d_head), (B, H, T, T)
        steps.append(
            (
                "scores, mask, softmax",
                "softmax(q kᵀ / √d_head, blocked = -inf)",
                tuple(weights.shape),
            )
        )
        steps.append(("weighted sum of values", "weights @ v", tuple(ctx.shape)))
        merged = merge_heads(ctx)  # (B, T, D)
        steps.append(("merge heads", "merge_heads(ctx)", tuple(merged.shape)))
        out = block.out_proj(merged)  # (B, T, D)
        steps.append(("mix heads", "block.out_proj(merged)", tuple(out.shape)))
        torch.testing.assert_close(out, block(x))  # the walk is the block's own forward
    return steps


def n_params(D: int, H: int, T: int = 8) -> int:
    from attention_lab.fused import MultiHeadSelfAttention

    return sum(p.numel() for p in MultiHeadSelfAttention(D, H, context_length=T).parameters())


def block_params(D: int = 64, H: int = 4, T: int = 32) -> dict[str, int]:
    """Parameters of notebook 11's whole block (``attention_lab.charlm.Block``), counted by part."""
    from attention_lab.charlm import Block

    block = Block(D, H, T)
    counts = {
        "D": D,
        "attention": sum(p.numel() for p in block.attn.parameters()),
        "mlp": sum(p.numel() for p in block.mlp.parameters()),
        "norms": sum(p.numel() for p in (*block.ln1.parameters(), *block.ln2.parameters())),
        "total": sum(p.numel() for p in block.parameters()),
    }
    # the formulas the sheet prints next to the counts
    assert counts["attention"] == 4 * D * D + 4 * D and counts["mlp"] == 8 * D * D + 5 * D
    assert counts["norms"] == 4 * D and counts["total"] == sum(list(counts.values())[1:4])
    return counts


def mask_conventions(T: int = MASK_T) -> list[tuple[str, str, str]]:
    """(API, how the mask is passed, what True means), found by running each API."""
    from attention_lab.functional import attention
    from attention_lab.masks import causal_mask

    torch.manual_seed(0)
    mask = causal_mask(T)  # (T, T) bool, True above the diagonal
    q, k, v = (torch.randn(1, T, 8) for _ in range(3))  # (1, T, 8) each

    def meaning(weights: torch.Tensor) -> str:  # weights (T, T) of a run with `mask`
        upper = weights[mask]
        if torch.all(upper == 0):
            return "True = blocked"
        if torch.all(weights[~mask] == 0):
            return "True = attend"
        raise AssertionError("the mask neither blocked nor allowed exactly the masked entries")

    _, w_ours = attention(q, k, v, mask)  # (1, T, T)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    _, w_mha = mha(q, k, v, attn_mask=mask, need_weights=True)  # (1, T, T), mean over heads
    # SDPA gives no weights: read them off by attending over one-hot values, v = identity.
    eye = torch.eye(T).unsqueeze(0)  # (1, T, T)
    w_sdpa = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)  # (1, T, T)
    return [
        (
            "attention_lab (attention, causal_mask, every module)",
            "mask=causal_mask(T)",
            meaning(w_ours[0]),
        ),
        ("torch.nn.MultiheadAttention", "attn_mask=bool (T, T)", meaning(w_mha[0].detach())),
        (
            "F.scaled_dot_product_attention",
            "attn_mask=bool (T, T); or is_causal=True",
            meaning(w_sdpa[0]),
        ),
    ]


INDUCTION_IDS = (3, 7, 1, 4, 9, 7)  # a row that repeats id 7: ... A B ... A -> B


def induction_example(ids: tuple[int, ...] = INDUCTION_IDS) -> dict[str, int]:
    """Where the induction head of notebook 10 looks in ``ids``, found by the lesson's rule
    (``after_previous_occurrence``): the last query p, its one matching key j (just after the
    earlier occurrence of ids[p]), that occurrence and the id copied, ids[j]."""
    from attention_lab.interventions import after_previous_occurrence

    rule = after_previous_occurrence(torch.tensor(ids))[0]  # (T, T) bool
    p = len(ids) - 1
    (keys,) = torch.nonzero(rule[p], as_tuple=True)  # (n,): the keys query p matches
    assert len(keys) == 1, "the example row must repeat its last id exactly once"
    j = int(keys[0])
    return {"p": p, "A": ids[p], "j": j, "earlier": j - 1, "B": ids[j]}


def induction_guess(n_rows: int = 1000, seed: int = 2024) -> float:
    """Notebook 10's baseline on its held-out rows: a guess among the ids seen exactly once."""
    from attention_lab.induction import in_context_guess
    from attention_lab.tasks import make_batch

    x, y = make_batch("induction", n_rows, generator=torch.Generator().manual_seed(seed))
    return in_context_guess(x, y, once=True)


def cost_rows(
    D: int, H: int, Ts: tuple[int, ...] = (1024, 2048, 4096)
) -> list[tuple[int, int, int]]:
    """(T, dense FLOPs of one block's forward, bytes of its float32 (B, H, T, T) weights), B = 1."""
    from attention_lab.cost import attention_flops

    return [(T, attention_flops(1, T, D), 4 * H * T * T) for T in Ts]


LLM_CACHE_T = 131_072  # the KV cache box's long context: Llama 3.1's 128k tokens


def llm_cache_rows(T: int = LLM_CACHE_T) -> list[dict]:
    """Lesson 12's KV cache per token and at ``T`` tokens, in bfloat16 (2 bytes a number), for
    Llama 3.1 8B as published (grouped-query), the same model with one key/value head per
    query head (what grouped-query attention saves), Mistral 7B's sliding window and
    DeepSeek-V3's latent (MLA) cache. Every size from ``cache_bytes``."""
    from dataclasses import replace

    from attention_lab.kv_cache import cache_bytes

    models = {m.name: m for m in PUBLISHED_MODELS}
    llama, mistral, deepseek = (
        models[name] for name in ("Llama 3.1 8B", "Mistral 7B v0.1", "DeepSeek-V3")
    )
    rows = [
        ("Llama 3.1 8B (GQA)", llama),
        ("Llama 3.1 8B with MHA", replace(llama, n_kv_heads=llama.n_heads)),
        (f"Mistral 7B, window {mistral.window:,}", mistral),
        ("DeepSeek-V3 (MLA)", deepseek),
    ]
    return [
        {
            "name": name,
            "H": m.n_heads,
            "kv": m.n_kv_heads,
            "kib": f"{cache_bytes(m, 1, 2) / 2**10:,.1f}".removesuffix(".0"),
            "gib": f"{cache_bytes(m, T, 2) / 2**30:,.2f}".rstrip("0").rstrip("."),
        }
        for name, m in rows
    ]


def _fmt(n: int) -> str:
    return f"{n:,}"


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


SYMBOLIC = [
    "(B, T, D)",
    "(B, T, 3D)",
    "3 × (B, H, T, d_head)",
    "(B, H, T, T)",
    "(B, H, T, d_head)",
    "(B, T, D)",
    "(B, T, D)",
]


def page_data() -> dict:
    """Everything the template shows, computed by the library and formatted (no words)."""
    c = CHAPTER
    walk = shape_walk(c["B"], c["T"], c["D"], c["H"])
    counts = [
        ("this chapter", c["D"], c["H"], n_params(c["D"], c["H"])),
        ("this chapter, 8 heads", c["D"], 2 * c["H"], n_params(c["D"], 2 * c["H"])),
        ("GPT-2 small", GPT2["D"], GPT2["H"], n_params(GPT2["D"], GPT2["H"], GPT2["T"])),
    ]
    costs = cost_rows(GPT2["D"], GPT2["H"])
    mla = next(m for m in PUBLISHED_MODELS if m.name == "DeepSeek-V3")
    return {
        "sizes": {**c, "d_head": c["D"] // c["H"]},
        "walk": [
            {
                "step": step,
                "code": code,
                "symbolic": sym,
                "shape": ("3 × " if sym.startswith("3 ×") else "") + _shape(shape),
            }
            for (step, code, shape), sym in zip(walk, SYMBOLIC)
        ],
        "mask_T": MASK_T,
        "conventions": [
            {"api": api, "how": how, "meaning": m} for api, how, m in mask_conventions(MASK_T)
        ],
        "counts": [
            {
                "name": name,
                "D": D,
                "H": H,
                "d_head": D // H,
                "formula": _fmt(4 * D * D + 4 * D),
                "counted": _fmt(n),
            }
            for name, D, H, n in counts
        ],
        "block": {k: _fmt(v) for k, v in block_params().items()},
        "costs": [
            {"T": f"{T:,}", "gflops": f"{flops / 1e9:,.1f}", "mib": f"{mem / 2**20:,.0f}"}
            for T, flops, mem in costs
        ],
        "ratio": f"{costs[1][2] / costs[0][2]:g}",
        "induction": {
            "ids": " ".join(map(str, INDUCTION_IDS)),
            **induction_example(),
            "guess": f"{induction_guess():.3f}",
        },
        "llm_T": f"{LLM_CACHE_T:,}",
        "llm": llm_cache_rows(),
        "mla": {"L": mla.n_layers, "d_latent": mla.d_latent, "d_rope": mla.d_rope},
    }
