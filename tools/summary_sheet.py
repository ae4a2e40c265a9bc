"""One printable page that sums up the chapter, with every number computed by the library.

    python tools/summary_sheet.py                 # teaching/summary.html and
                                                  # teaching/zh-CN/summary.html (checked in)
    python tools/summary_sheet.py --lang zh-CN    # only the Simplified Chinese page
    python tools/summary_sheet.py --check         # fail if either checked-in page is stale
    python tools/summary_sheet.py --out DIR       # also DIR/summary.html, DIR/zh-CN/summary.html
    python tools/summary_sheet.py --out DIR --pdf # and the .pdf next to each (headless Chromium)

Nothing on the sheet is typed in by hand: the shape walk is recorded from a real forward pass
of ``attention_lab.MultiHeadSelfAttention`` (and checked equal to the block's own output), the
parameter counts come from building the block and counting, each mask convention is found by
running that API with ``causal_mask(T)`` and seeing whether True blocked or allowed, and the
cost table uses ``attention_lab.cost``. tests/test_slides.py rebuilds the page and fails when
teaching/summary.html is stale; tests/test_summary_sheet_zh.py does the same for the Simplified
Chinese edition, teaching/zh-CN/summary.html (same numbers, same tables, Chinese prose).
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
LANGS = ("en", "zh-CN")
PAGES = {"en": CHECKED_IN, "zh-CN": ROOT / "teaching" / "zh-CN" / "summary.html"}

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


def block_params(D: int = 64, H: int = 4, T: int = 32) -> dict[str, int]:
    """Parameters of notebook 09's whole block (``attention_lab.charlm.Block``), counted by part."""
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


def render(lang: str = "en") -> str:
    """The sheet as HTML, in English (``lang="en"``) or Simplified Chinese (``"zh-CN"``)."""
    if lang not in LANGS:
        raise ValueError(f"unknown lang={lang!r}: use one of {', '.join(LANGS)}")
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
    full = {k: _fmt(v) for k, v in block_params().items()}
    label = _english if lang == "en" else _chinese
    walk_rows, conv_rows, count_rows, cost_rows_html = _table_rows(walk, conv, counts, costs, label)
    ratio = costs[1][2] / costs[0][2]
    if lang == "zh-CN":
        return _render_zh(c, d_head, walk_rows, conv_rows, count_rows, cost_rows_html, ratio, full)
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
<p class="small">A whole Transformer block (notebook 09, <code>attention_lab.charlm.Block</code>:
<code>x + attn(ln1(x))</code>, then <code>x + mlp(ln2(x))</code>) at D = {full["D"]}: attention
{full["attention"]} + MLP {full["mlp"]} (8D² + 5D) + two layer norms {full["norms"]} (4D) =
{full["total"]}, counted.</p>
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


# ---------------------------------------------------------------- Simplified Chinese edition
# Same data, same tables; only the prose and the labels are Chinese (terms from
# i18n/glossary.tsv). Code, shapes and API names stay English.

STEP_ZH = {
    "input": "输入",
    "project once": "一次投影",
    "split Q, K, V into heads": "把 Q、K、V 切头",
    "scores, mask, softmax": "打分、掩码、softmax",
    "weighted sum of values": "对值加权求和",
    "merge heads": "合头",
    "mix heads": "混合各头（输出投影）",
}
API_ZH = {
    "attention_lab (attention, causal_mask, every module)": (
        "attention_lab（attention、causal_mask 及所有模块）"
    )
}
MEANING_ZH = {"True = blocked": "True = 屏蔽", "True = attend": "True = 可关注"}
NAME_ZH = {
    "this chapter": "本章",
    "this chapter, 8 heads": "本章，8 个头",
    "GPT-2 small": "GPT-2 small",
}

CJK_FONTS = '"Noto Sans CJK SC", "Source Han Sans SC", "Microsoft YaHei", "PingFang SC"'
CSS_ZH = CSS.replace(
    'body { font: 10.5pt/1.35 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif;',
    f'body {{ font: 10.5pt/1.45 {CJK_FONTS}, "DejaVu Sans", sans-serif;',
)
assert CSS_ZH != CSS, "the body font rule of CSS changed: update CSS_ZH"


def _zh(table: dict[str, str], key: str) -> str:
    if key not in table:
        raise KeyError(
            f"no Chinese label for {key!r}: add it to the tables in tools/summary_sheet.py"
        )
    return table[key]


def _english(kind: str, text: str) -> str:
    return text


def _chinese(kind: str, text: str) -> str:
    """The Chinese label of a table cell: ``kind`` names the table it comes from."""
    if kind == "api":
        return API_ZH.get(text, text)
    return _zh({"step": STEP_ZH, "meaning": MEANING_ZH, "name": NAME_ZH}[kind], text)


def _table_rows(walk, conv, counts, costs, label) -> tuple[str, str, str, str]:
    """The four tables' rows as HTML; ``label(kind, text)`` gives each text cell its words."""
    e = html.escape
    walk_rows = "\n".join(
        f"<tr><td>{e(label('step', step))}</td><td><code>{e(code)}</code></td>"
        f"<td><code>{e(sym)}</code></td>"
        f"<td><code>{'3 × ' if sym.startswith('3 ×') else ''}{_shape(shape)}</code></td></tr>"
        for (step, code, shape), sym in zip(walk, SYMBOLIC)
    )
    conv_rows = "\n".join(
        f"<tr><td>{e(label('api', api))}</td><td><code>{e(how)}</code></td>"
        f"<td><b>{e(label('meaning', m))}</b></td></tr>"
        for api, how, m in conv
    )
    count_rows = "\n".join(
        f"<tr><td>{e(label('name', name))}</td><td class='n'>{D}</td><td class='n'>{H}</td>"
        f"<td class='n'>{D // H}</td>"
        f"<td class='n'>{_fmt(4 * D * D + 4 * D)}</td><td class='n'>{_fmt(n)}</td></tr>"
        for name, D, H, n in counts
    )
    cost_rows_html = "\n".join(
        f"<tr><td class='n'>{T:,}</td><td class='n'>{flops / 1e9:,.1f}</td>"
        f"<td class='n'>{mem / 2**20:,.0f}</td></tr>"
        for T, flops, mem in costs
    )
    return walk_rows, conv_rows, count_rows, cost_rows_html


def _render_zh(c, d_head, walk_rows, conv_rows, count_rows, cost_rows_html, ratio, full) -> str:
    return f"""<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<title>Attention Lab：一页看懂多头自注意力</title>
<!-- generated by tools/summary_sheet.py --lang zh-CN; do not edit by hand -->
<style>{CSS_ZH}</style>
</head>
<body>
<h1>一页看懂多头自注意力</h1>
<p class="small">Attention Lab 总结页。下面的每个数字都是生成本页时由
<code>attention_lab</code> 库计算出来的（<code>python tools/summary_sheet.py</code>）。</p>

<h2>公式</h2>
<div class="formula">Attention(Q, K, V) = softmax( Q K<sup>T</sup> / √d<sub>head</sub> + M ) V</div>
<p>Q = X W<sub>Q</sub>，K = X W<sub>K</sub>，V = X W<sub>V</sub>
（由一个融合的 <code>Linear(D, 3D)</code> 一次算出）。
查询可以关注的位置上 M 为 0，被屏蔽的位置上 M 为 −∞（用因果掩码时，被屏蔽的是未来的位置）。
M 在 softmax <b>之前</b>加上，所以每一行之和仍为 1。H 个头各自在自己的
d<sub>head</sub> = D / H 个特征里完成这一步；随后 <code>out_proj</code>
（W<sub>O</sub>）把各头的结果混合起来。
除以 √d<sub>head</sub> 让打分的方差保持在 1 附近，softmax 就不会饱和。</p>

<h2>形状追踪（B = {c["B"]}，T = {c["T"]}，D = {c["D"]}，H = {c["H"]}，d_head = {d_head}）</h2>
<table>
<tr><th>步骤</th><th>代码</th><th>形状</th><th>本章尺寸</th></tr>
{walk_rows}
</table>

<h2>掩码约定：布尔掩码里的 <code>True</code> 是什么意思</h2>
<table>
<tr><th>API</th><th>掩码的传入方式</th><th>True 表示</th></tr>
{conv_rows}
</table>
<p class="small">因此，<code>causal_mask(T)</code> 生成的掩码可以原样传给
<code>nn.MultiheadAttention</code>；传给 <code>F.scaled_dot_product_attention</code> 之前却必须取反
（<code>~mask</code> 或 <code>to_sdpa_mask(mask)</code>）。
这一表格是生成本页时用 <code>causal_mask({4})</code> 逐一运行各个 API 得到的。</p>

<div class="two">
<div>
<h2>一个注意力块的参数量：4·D² + 4·D</h2>
<table>
<tr><th></th><th>D</th><th>H</th><th>d_head</th><th>4D²+4D</th><th>实际计数</th></tr>
{count_rows}
</table>
<p class="small"><code>qkv</code>：3D² 个权重 + 3D 个偏置；<code>out_proj</code>：D² + D。
公式里没有 H：头数变多，只是把同样的 D 个特征切成更窄的几份。
“实际计数”是对构建好的 <code>MultiHeadSelfAttention</code>
求 <code>sum(p.numel())</code> 的结果。</p>
<p class="small">完整的 Transformer 块（笔记本 09，<code>attention_lab.charlm.Block</code>：
<code>x + attn(ln1(x))</code>，再 <code>x + mlp(ln2(x))</code>）在 D = {full["D"]} 时：注意力
{full["attention"]} + MLP {full["mlp"]}（8D² + 5D）+ 两个层归一化 {full["norms"]}（4D）=
{full["total"]}，均为实际计数。</p>
</div>
<div>
<h2>开销随 T 的增长（GPT-2 small 的一个块，B = 1）</h2>
<table>
<tr><th>T</th><th>GFLOPs（稠密）</th><th>(B, H, T, T) 注意力权重，MiB</th></tr>
{cost_rows_html}
</table>
<p class="small">时间 O(B·T²·D)（投影另加 O(B·T·D²)）；注意力权重占用的内存
O(B·H·T²)：T 翻倍，内存变为原来的 {ratio:g} 倍。融合算子（SDPA）从不存储 (T, T)
注意力权重，所以也无法返回它们。</p>
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
        "--lang",
        choices=(*LANGS, "all"),
        default="all",
        help="which edition to build or check: en (teaching/summary.html), "
        "zh-CN (teaching/zh-CN/summary.html) or all (default)",
    )
    parser.add_argument(
        "--check", action="store_true", help="fail if a checked-in summary.html is stale"
    )
    args = parser.parse_args(argv)
    langs = LANGS if args.lang == "all" else (args.lang,)
    pages = {lang: render(lang) for lang in langs}
    if args.check:
        stale = [
            PAGES[lang]
            for lang, page in pages.items()
            if not PAGES[lang].exists() or PAGES[lang].read_text(encoding="utf-8") != page
        ]
        for path in stale:
            print(f"{path} is stale: run python tools/summary_sheet.py", file=sys.stderr)
        for lang in pages:
            if PAGES[lang] not in stale:
                print(f"{PAGES[lang]} is up to date")
        return 1 if stale else 0
    for lang, page in pages.items():
        PAGES[lang].parent.mkdir(parents=True, exist_ok=True)
        PAGES[lang].write_text(page, encoding="utf-8")
        print(PAGES[lang].relative_to(ROOT))
        if args.out:
            out_dir = args.out if lang == "en" else args.out / lang
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / "summary.html"
            target.write_text(page, encoding="utf-8")
            print(target)
            if args.pdf:
                pdf = out_dir / "summary.pdf"
                if print_pdf(target, pdf):
                    print(pdf)
                else:
                    print("no Chromium found: summary.pdf not printed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
