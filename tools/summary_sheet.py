"""One printable page that sums up the chapter, with every number computed by the library.

    python tools/summary_sheet.py                 # teaching/summary.html (checked in)
    python tools/summary_sheet.py --out DIR       # also DIR/summary.html
    python tools/summary_sheet.py --out DIR --pdf # and DIR/summary.pdf (headless Chromium)

Nothing on the sheet is typed in by hand: the shape walk is recorded from a real forward pass
of ``attention_lab.MultiHeadSelfAttention`` (and checked equal to the block's own output), the
parameter counts come from building the block and counting, each mask convention is found by
running that API with ``causal_mask(T)`` and seeing whether True blocked or allowed, and the
cost table uses ``attention_lab.cost``. tests/test_slides.py rebuilds the page and fails when
teaching/summary.html is stale.
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
CHECKED_IN = ROOT / "teaching" / "summary.html"

# The chapter's sizes: TinyLM of notebook 08 (d_model=32, n_heads=4, context_length=12),
# a batch of two sequences as in notebooks 05-07; and GPT-2 small for scale.
CHAPTER = {"B": 2, "T": 12, "D": 32, "H": 4}
GPT2 = {"D": 768, "H": 12, "T": 1024}


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


def mask_conventions(T: int = 4) -> list[tuple[str, str, str]]:
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


def cost_rows(
    D: int, H: int, Ts: tuple[int, ...] = (1024, 2048, 4096)
) -> list[tuple[int, int, int]]:
    """(T, dense FLOPs of one block's forward, bytes of its float32 (B, H, T, T) weights), B = 1."""
    from attention_lab.cost import attention_flops

    return [(T, attention_flops(1, T, D), 4 * H * T * T) for T in Ts]


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

CSS = """
@page { size: A4; margin: 11mm 12mm; }
* { box-sizing: border-box; }
body { font: 10.5pt/1.35 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #111;
       max-width: 190mm; margin: 1.5em auto; }
h1 { font-size: 17pt; margin: 0 0 2pt; }
h2 { font-size: 11.5pt; margin: 9pt 0 3pt; border-bottom: 1px solid #999; }
p { margin: 2pt 0; }
.formula { font: 15pt "DejaVu Serif", Georgia, serif; text-align: center; margin: 5pt 0; }
table { border-collapse: collapse; width: 100%; font-size: 9.5pt; }
th, td { border: 1px solid #bbb; padding: 1.5pt 5pt; text-align: left; vertical-align: top; }
th { background: #eee; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 9pt "DejaVu Sans Mono", Menlo, monospace; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 10pt; }
.small { font-size: 8.5pt; color: #333; }
@media print { body { margin: 0; max-width: none; } a { color: inherit; text-decoration: none; } }
"""


def render() -> str:
    c = CHAPTER
    d_head = c["D"] // c["H"]
    walk = shape_walk(c["B"], c["T"], c["D"], c["H"])
    conv = mask_conventions()
    counts = [
        ("this chapter", c["D"], c["H"], n_params(c["D"], c["H"])),
        ("this chapter, 8 heads", c["D"], 2 * c["H"], n_params(c["D"], 2 * c["H"])),
        ("GPT-2 small", GPT2["D"], GPT2["H"], n_params(GPT2["D"], GPT2["H"], GPT2["T"])),
    ]
    costs = cost_rows(GPT2["D"], GPT2["H"])
    e = html.escape

    walk_rows = "\n".join(
        f"<tr><td>{e(step)}</td><td><code>{e(code)}</code></td><td><code>{e(sym)}</code></td>"
        f"<td><code>{'3 × ' if sym.startswith('3 ×') else ''}{_shape(shape)}</code></td></tr>"
        for (step, code, shape), sym in zip(walk, [SYMBOLIC[0]] + SYMBOLIC[1:])
    )
    conv_rows = "\n".join(
        f"<tr><td>{e(api)}</td><td><code>{e(how)}</code></td><td><b>{e(m)}</b></td></tr>"
        for api, how, m in conv
    )
    count_rows = "\n".join(
        f"<tr><td>{e(name)}</td><td class='n'>{D}</td><td class='n'>{H}</td>"
        f"<td class='n'>{D // H}</td>"
        f"<td class='n'>{_fmt(4 * D * D + 4 * D)}</td><td class='n'>{_fmt(n)}</td></tr>"
        for name, D, H, n in counts
    )
    cost_rows_html = "\n".join(
        f"<tr><td class='n'>{T:,}</td><td class='n'>{flops / 1e9:,.1f}</td>"
        f"<td class='n'>{mem / 2**20:,.0f}</td></tr>"
        for T, flops, mem in costs
    )
    ratio = costs[1][2] / costs[0][2]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Attention Lab: multi-head self-attention on one page</title>
<!-- generated by tools/summary_sheet.py; do not edit by hand -->
<style>{CSS}</style>
</head>
<body>
<h1>Multi-head self-attention on one page</h1>
<p class="small">Attention Lab summary sheet. Every number below was computed by the
<code>attention_lab</code> library when this page was built
(<code>python tools/summary_sheet.py</code>).</p>

<h2>The formula</h2>
<div class="formula">Attention(Q, K, V) = softmax( Q K<sup>T</sup> / √d<sub>head</sub> + M ) V</div>
<p>Q = X W<sub>Q</sub>, K = X W<sub>K</sub>, V = X W<sub>V</sub>
(one fused <code>Linear(D, 3D)</code>);
M is 0 where a query may look and −∞ where it is blocked (the future, for a causal mask), added
<b>before</b> the softmax so every row still sums to 1. Each of the H heads does this in its own
d<sub>head</sub> = D / H features; <code>out_proj</code> (W<sub>O</sub>) then mixes the heads.
Dividing by √d<sub>head</sub> keeps the scores' variance near 1 so the softmax does not
saturate.</p>

<h2>The shape walk (B = {c["B"]}, T = {c["T"]}, D = {c["D"]}, H = {c["H"]}, d_head = {d_head})</h2>
<table>
<tr><th>step</th><th>code</th><th>shape</th><th>chapter size</th></tr>
{walk_rows}
</table>

<h2>Mask conventions: what <code>True</code> means in a boolean mask</h2>
<table>
<tr><th>API</th><th>how the mask is passed</th><th>True means</th></tr>
{conv_rows}
</table>
<p class="small">So a mask from <code>causal_mask(T)</code> goes unchanged into
<code>nn.MultiheadAttention</code>, but must be flipped (<code>~mask</code>,
<code>to_sdpa_mask(mask)</code>) for <code>F.scaled_dot_product_attention</code>.
Found by running each API with <code>causal_mask({4})</code> when this page was built.</p>

<div class="two">
<div>
<h2>Parameters of one block: 4·D² + 4·D</h2>
<table>
<tr><th></th><th>D</th><th>H</th><th>d_head</th><th>4D²+4D</th><th>counted</th></tr>
{count_rows}
</table>
<p class="small"><code>qkv</code>: 3D² weights + 3D biases; <code>out_proj</code>: D² + D.
H does not appear: more heads cut the same D features into narrower pieces.
“counted” = <code>sum(p.numel())</code> of a built <code>MultiHeadSelfAttention</code>.</p>
</div>
<div>
<h2>Cost in T (GPT-2 small block, B = 1)</h2>
<table>
<tr><th>T</th><th>GFLOPs (dense)</th><th>(B, H, T, T) weights, MiB</th></tr>
{cost_rows_html}
</table>
<p class="small">Time O(B·T²·D) (+ O(B·T·D²) for the projections); memory of the weights
O(B·H·T²): doubling T multiplies it by {ratio:g}. Fused kernels (SDPA) never store the (T, T)
weights, which is why they cannot return them.</p>
</div>
</div>
</body>
</html>
"""


def print_pdf(html_path: Path, pdf_path: Path) -> bool:
    """Print `html_path` to PDF with headless Chromium; False when there is no Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return False
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf_path}",
            html_path.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return pdf_path.exists()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write summary.html (and .pdf) here")
    parser.add_argument("--pdf", action="store_true", help="print summary.pdf with Chromium")
    parser.add_argument(
        "--check", action="store_true", help="fail if teaching/summary.html is stale"
    )
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if not CHECKED_IN.exists() or CHECKED_IN.read_text(encoding="utf-8") != page:
            print(f"{CHECKED_IN} is stale: run python tools/summary_sheet.py", file=sys.stderr)
            return 1
        print(f"{CHECKED_IN} is up to date")
        return 0
    CHECKED_IN.parent.mkdir(parents=True, exist_ok=True)
    CHECKED_IN.write_text(page, encoding="utf-8")
    print(CHECKED_IN.relative_to(ROOT))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        target = args.out / "summary.html"
        target.write_text(page, encoding="utf-8")
        print(target)
        if args.pdf:
            pdf = args.out / "summary.pdf"
            if print_pdf(target, pdf):
                print(pdf)
            else:
                print("no Chromium found: summary.pdf not printed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
