"""The drawn diagrams (the ``diagrams`` package): what they draw matches the sizes asked for.

The tests that render run on both drawing paths, fast and plain Agg (``path``)."""

from __future__ import annotations

import inspect
import io
import time

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from attention_lab.kv_cache import cache_bytes
from attention_lab.published import PUBLISHED_MODELS
from attention_lab.viz import _mpl_fast, diagrams
from attention_lab.viz.canvas import LabFigure
from attention_lab.viz.diagrams.roadmap import NOTEBOOKS
from attention_lab.viz.palette import BLOCKED_COLOR, HEAD_COLORS, head_color


@pytest.fixture(params=["fast", "plain"])
def path(request):
    """The test on the fast drawing path and on the plain-Agg fallback (_mpl_fast)."""
    _mpl_fast.use_plain_agg(request.param == "plain")
    if request.param == "fast" and not _mpl_fast.fast_path():
        pytest.skip(_mpl_fast.status())  # test_mpl_fast fails for the pinned versions
    diagrams.head_split_png.cache_clear()  # PNGs drawn on the other path
    yield request.param
    _mpl_fast.use_plain_agg(False)
    diagrams.head_split_png.cache_clear()


def head_patches(fig) -> dict[int, list]:
    """The patches tagged ``head h`` in a figure, by head."""
    found: dict[int, list] = {}
    for ax in fig.axes:
        for patch in ax.patches:
            gid = patch.get_gid() or ""
            if gid.startswith("head "):
                found.setdefault(int(gid.split()[1]), []).append(patch)
    return found


def render_seconds(fig) -> float:
    """CPU seconds to render ``fig`` to PNG (CPU time: other jobs on the machine don't count)."""
    start = time.process_time()
    fig.savefig(io.BytesIO(), format="png")
    return time.process_time() - start


PUBLISHED = {model.name: model for model in PUBLISHED_MODELS}

# A regression guard, not the measurement: idle, a diagram renders in well under 0.1 s
# (numbers in the issue-10 report); on a shared 2-core CI runner it can be many times slower.
SLOW = 2.0


@pytest.mark.parametrize(("T", "D", "H"), [(6, 32, 4), (16, 128, 8), (4, 8, 1), (5, 12, 3)])
def test_head_split_draws_every_head_in_its_colour_at_every_stage(T, D, H):
    fig = diagrams.head_split(T, D, H)
    assert isinstance(fig, LabFigure)
    patches = head_patches(fig)
    assert sorted(patches) == list(range(H))
    for h, drawn in patches.items():
        stages = [p.get_label() for p in drawn]
        # x, one piece per token in .view, one matrix per head after .transpose, merged
        assert stages.count("x") == stages.count("transpose") == stages.count("merged") == 1
        assert stages.count("view") == min(T, 32 // H)
        assert {to_hex(p.get_facecolor()) for p in drawn} == {head_color(h).lower()}
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert f"= (1, {T}, {H}, {D // H})" in texts and f"= (1, {H}, {T}, {D // H})" in texts


def test_head_split_slices_are_d_head_wide_and_tile_d_model():
    fig = diagrams.head_split(6, 32, 4)
    first = [head_patches(fig)[h][0] for h in range(4)]  # the x stage
    widths = {round(p.get_width(), 9) for p in first}
    assert len(widths) == 1  # equal slices: d_head columns each
    xs = [p.get_x() for p in first]
    assert np.allclose(np.diff(xs), first[0].get_width())  # side by side, no gap


def by_stage(fig, stage: str) -> list:
    return [p for p in head_patches_flat(fig) if p.get_label() == stage]


def head_patches_flat(fig) -> list:
    return [p for drawn in head_patches(fig).values() for p in drawn]


@pytest.mark.parametrize(("T", "D", "H"), [(5, 12, 3), (6, 32, 4), (16, 128, 8)])
def test_the_view_puts_heads_inside_each_token_and_the_transpose_gives_one_block_per_head(T, D, H):
    fig = diagrams.head_split(T, D, H, B=2)
    # .view: each token is one small (H, d_head) matrix holding every head, stacked by token
    view = by_stage(fig, "view")
    n_tokens = min(T, 32 // H)  # tokens drawn
    assert len(view) == H * n_tokens
    assert len({round(p.get_height(), 6) for p in view}) == 1  # every (token, head) piece alike
    outlines = patches_with(fig, "token matrix")
    assert len(outlines) == n_tokens
    for box in outlines:
        lo, hi = box.get_y() - 1e-6, box.get_y() + box.get_height() + 1e-6
        inside = [p for p in view if lo <= p.get_y() and p.get_y() + p.get_height() <= hi]
        assert sorted(int(p.get_gid().split()[1]) for p in inside) == list(range(H))
    # .transpose(1, 2): H separate blocks, one per head, each the full T rows high, apart
    blocks = sorted(by_stage(fig, "transpose"), key=lambda p: p.get_x())
    assert [p.get_gid() for p in blocks] == [f"head {h}" for h in range(H)]
    assert [to_hex(p.get_facecolor()) for p in blocks] == [head_color(h).lower() for h in range(H)]
    x = by_stage(fig, "x")
    assert {round(p.get_height(), 6) for p in blocks} == {round(x[0].get_height(), 6)}
    for a, b in zip(blocks, blocks[1:]):
        assert a.get_x() + a.get_width() < b.get_x()  # a gap: separate matrices
    shown = texts(fig)
    assert f"each token: (H, d_head) = ({H}, {D // H})" in shown
    assert f"rows: T = {T} tokens, columns: d_head = {D // H}" in shown
    assert f"its own ({T}, {D // H}) matrix" in shown


def test_head_split_draws_into_an_existing_axes():
    fig = LabFigure(figsize=(8, 3))
    ax = fig.subplots()
    patches = diagrams.draw_head_split(ax, 6, 16, 2)
    assert len(patches) == 2 * (3 + 6) and all(isinstance(p, Rectangle) for p in patches)
    assert diagrams.head_split(6, 16, 2, ax=ax) is fig


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((6, 30, 4), "d_model=30 is not divisible by n_heads=4"),
        ((6, 32, 9), "n_heads=9 must be a whole number between 1 and 8"),
        ((6, 256, 4), "d_model=256"),
        ((0, 32, 4), "T=0"),
    ],
)
def test_head_split_refuses_sizes_it_cannot_draw(args, message):
    with pytest.raises(ValueError, match=message):
        diagrams.head_split(*args)


def test_head_colours_are_distinct_and_there_are_enough():
    assert len(set(HEAD_COLORS)) == len(HEAD_COLORS) >= 8
    assert head_color(0) == head_color(len(HEAD_COLORS))


def test_head_split_renders_fast_enough_for_the_explorer():
    diagrams.head_split(16, 128, 8).savefig(io.BytesIO(), format="png")  # warm up fonts
    best = min(render_seconds(diagrams.head_split(16, 128, 8)) for _ in range(3))
    assert best < SLOW


def patches_with(fig, gid: str) -> list:
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == gid]


def texts(fig) -> str:
    return " | ".join(t.get_text() for ax in fig.axes for t in ax.texts)


@pytest.mark.parametrize("T", [1, 2, 6, 12])
def test_causal_mask_grid_blocks_exactly_the_cells_above_the_diagonal(path, T):
    fig = diagrams.causal_mask_grid(T)
    blocked = patches_with(fig, "blocked")
    allowed = patches_with(fig, "allowed")
    assert len(blocked) == T * (T - 1) // 2 and len(allowed) == T * (T + 1) // 2
    for cell in blocked:  # a cell at (j - 0.5, i - 0.5) is query i, key j
        j, i = cell.get_x() + 0.5, cell.get_y() + 0.5
        assert j > i
        assert to_hex(cell.get_facecolor()) == BLOCKED_COLOR.lower()
    # the stripes: one hatched path made of exactly the blocked squares
    stripes = patches_with(fig, "blocked stripes")
    assert len(stripes) == (T > 1)
    for patch in stripes:
        corners = patch.get_path().vertices[::5]  # each square: 4 corners + close
        assert patch.get_hatch() == "///"
        assert sorted(map(tuple, corners.tolist())) == sorted(c.get_xy() for c in blocked)
    key = [t.get_text() for t in fig.texts if t.get_gid() == "key"]
    assert key[0] == "blocked"  # the drawn key names the grey, striped cells


def test_mask_before_vs_after_writes_the_true_row_sums(path):
    scores = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    fig = diagrams.mask_before_vs_after(scores)
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    before = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)  # (T, T)
    after = torch.softmax(scores, -1).masked_fill(mask, 0.0)  # (T, T)
    texts = [t for ax in fig.axes for t in ax.texts]
    patches = [p for ax in fig.axes for p in ax.patches]
    for name, w in (("before", before), ("after", after)):  # each panel's artists carry its name
        sums = [t.get_text() for t in texts if t.get_gid() == "row sum" and t.get_label() == name]
        assert sums == [f"sum {s:.2f}" for s in w.sum(-1).tolist()]
        cells = [t.get_text() for t in texts if t.get_label() == name and not t.get_gid()]
        assert cells == [f"{w[i, j]:.2f}" for i in range(5) for j in range(i + 1)]
        (blocked,) = [p for p in patches if p.get_gid() == "blocked" and p.get_label() == name]
        squares = blocked.get_path().vertices[::5] + 0.5  # (key j + offset, query i) corners
        assert blocked.get_hatch() == "///" and len(squares) == 10
        keys = squares[:, 0] - squares[:, 0].min() + 1  # key 1 is the leftmost blocked column
        assert sorted(zip(squares[:, 1].tolist(), keys.round().tolist())) == [
            (i, j) for i in range(5) for j in range(i + 1, 5)
        ]  # exactly the cells above the diagonal
    assert sum(t.get_gid() == "row sum" for t in texts) == 10
    assert all(
        s == "sum 1.00"
        for s in [t.get_text() for t in texts if t.get_label() == "before" and t.get_gid()]
    )


def test_dropout_row_drops_and_rescales_like_its_own_draw():
    w = torch.softmax(torch.randn(8, generator=torch.Generator().manual_seed(1)), -1)
    p = 0.25
    fig = diagrams.dropout_row(w, p, seed=3)
    keep = np.random.default_rng(3).random(8) >= p
    assert len(patches_with(fig, "dropped")) == int((~keep).sum())
    kept = patches_with(fig, "kept")
    assert len(kept) == int(keep.sum())
    shown = [t.get_text() for ax in fig.axes for t in ax.texts]
    for value in (w.numpy()[keep] / (1 - p)).tolist():
        assert f"{value:.2f}" in shown
    assert "1/(1-p) = 1.33" in texts(fig)


def test_dropped_cells_look_unlike_blocked_ones_and_are_labelled_as_dropout():
    from attention_lab.viz.palette import BLOCKED_HATCH_COLOR, DROPPED_EDGE_COLOR, DROPPED_LABEL

    fig = diagrams.dropout_row(np.full(6, 1 / 6), 0.5, seed=4)
    dropped = patches_with(fig, "dropped")
    assert dropped
    grey = {BLOCKED_COLOR.lower(), BLOCKED_HATCH_COLOR.lower()}
    for cell in dropped:
        assert to_hex(cell.get_facecolor()) not in grey
        assert to_hex(cell.get_facecolor()) == "#ffffff"  # white, not grey
        assert not cell.get_hatch()  # no stripes: those mean "blocked by the mask"
        assert to_hex(cell.get_edgecolor()) == DROPPED_EDGE_COLOR.lower()
    marks = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "dropped mark"]
    assert len(marks) == len(dropped) and all("×" in t.get_text() for t in marks)
    key = [t.get_text() for t in fig.texts if t.get_gid() == "key"]
    assert any(DROPPED_LABEL in k for k in key) and DROPPED_LABEL == "dropped (dropout)"
    assert not any("blocked" in k for k in key)
    # nothing in the figure is grey or striped
    for ax in fig.axes:
        for patch in ax.patches:
            assert to_hex(patch.get_facecolor()) not in grey and not patch.get_hatch()


def test_weighted_average_draws_one_arrow_per_token_thicker_for_bigger_weights():
    w = torch.tensor([0.1, 0.6, 0.3])
    fig = diagrams.weighted_average(w, ["a", "b", "c"], query="b")
    arrows = [patches_with(fig, f"arrow {i}")[0] for i in range(3)]
    widths = [a.get_linewidth() for a in arrows]
    assert widths[1] > widths[2] > widths[0]
    assert "query" in texts(fig) and "0.60" in texts(fig)


def test_weighted_average_refuses_weights_that_do_not_sum_to_one():
    with pytest.raises(ValueError, match="summing to 1: pass softmax"):
        diagrams.weighted_average([0.5, 0.9], ["a", "b"])
    with pytest.raises(ValueError, match="2 tokens for 3 weights"):
        diagrams.weighted_average([0.2, 0.3, 0.5], ["a", "b"])


def test_qkv_flow_unscaled_draws_q_k_t_as_notebook_02_computes_it(path):
    unscaled = texts(diagrams.qkv_flow(6, 16, 8, scaled=False))
    assert "Q Kᵀ | scores (6, 6)" in unscaled and "√d_head = √8" not in unscaled
    assert "/ √d_head" not in unscaled.replace("divided by √d_head", "")
    assert "scaling: notebook 03" in unscaled
    scaled = texts(diagrams.qkv_flow(6, 16, 8))  # the default: notebook 03's scaled scores
    assert "Q Kᵀ / √d_head | scores (6, 6)" in scaled and "√d_head = √8 = 2.83" in scaled
    assert "notebook 03" not in scaled
    assert texts_outside_their_box(diagrams.qkv_flow(16, 512, 64, scaled=False)) == []


def test_qkv_flow_labels_every_box_with_its_shape():
    fig = diagrams.qkv_flow(T=6, D=32, d_head=8)
    found = texts(fig)
    for shape in (
        "x  (T, D) | (6, 32)",
        "W_q: (32, 8)",
        "W_k: (32, 8)",
        "W_v: (32, 8)",
        "Q  (T, d_head) | (6, 8)",
        "K  (T, d_head) | (6, 8)",
        "V  (T, d_head) | (6, 8)",
        "scores (6, 6)",
        "weights  (T, T) | (6, 6)",
        "context (6, 8)",
        "√8 = 2.83",
    ):
        assert shape in found
    for gid in ("W_q", "W_k", "W_v", "Q", "K", "V", "scores", "weights", "context"):
        assert len(patches_with(fig, gid)) == 1


@pytest.mark.parametrize(("D", "H", "fused"), [(32, 4, False), (32, 4, True), (48, 8, True)])
def test_head_rows_gives_each_head_d_head_rows_per_block_in_its_colour(D, H, fused):
    fig = diagrams.head_rows(D, H, fused=fused)
    blocks = "QKV" if fused else "Q"
    heights = []
    for b in blocks:
        bands = [patches_with(fig, f"head {h} {b}")[0] for h in range(H)]
        assert [to_hex(p.get_facecolor()) for p in bands] == [
            head_color(h).lower() for h in range(H)
        ]
        heights += [p.get_height() for p in bands]
        ys = [p.get_y() for p in bands]
        assert ys == sorted(ys, reverse=True)  # head 0 owns the first rows (top)
    assert np.allclose(heights, heights[0])  # every head owns d_head rows
    rows = 3 * D if fused else D
    assert f"({rows}, {D})" in texts(fig)
    assert f"rows 0-{D // H - 1}" in texts(fig)


@pytest.mark.parametrize(("D", "H", "fused"), [(12, 3, False), (32, 4, False), (12, 3, True)])
def test_head_rows_draws_the_weight_to_scale_under_the_code_names(path, D, H, fused):
    import attention_lab

    fig = diagrams.head_rows(D, H, fused=fused)
    fig.canvas.draw()
    (matrix,) = patches_with(fig, "weight")
    box = matrix.get_window_extent(fig.canvas.get_renderer())
    rows = 3 * D if fused else D
    assert box.height / box.width == pytest.approx(rows / D, rel=0.02)  # square when (D, D)
    # the names the code uses: MultiHeadAttention.W_q, MultiHeadSelfAttention.qkv
    module = (
        attention_lab.MultiHeadSelfAttention(D, H, 8)
        if fused
        else attention_lab.MultiHeadAttention(D, H, 8)
    )
    name = "qkv" if fused else "W_q"
    assert tuple(getattr(module, name).weight.shape) == (rows, D)
    assert f"{name}.weight: ({rows}, {D})" in texts(fig)
    assert "q_proj" not in texts(fig) + " ".join(t.get_text() for t in fig.texts)


def test_training_setup_draws_the_model_with_its_shapes_and_heads():
    fig = diagrams.training_setup(vocab_size=16, T=8, D=32, H=4)
    found = texts(fig)
    for shape in ("(16, 32) table", "(8, 32) table", "Linear(32, 16)", "(B, T, 16)", "d_head = 8"):
        assert shape in found
    assert sorted(head_patches(fig)) == [0, 1, 2, 3]


def drawn_number(fig, gid: str) -> float:
    (text,) = [t for ax in fig.axes for t in ax.texts if t.get_gid() == gid]
    return float(text.get_text())


def running(scores: torch.Tensor, values: torch.Tensor, end: int) -> tuple[float, float, float]:
    """m, l and acc after the first ``end`` keys, computed in one go (no tiles)."""
    seen = scores[:end].double()
    m = seen.max()
    e = torch.exp(seen - m)
    return float(m), float(e.sum()), float(e @ values[:end].double())


@pytest.mark.parametrize(("T", "tile"), [(8, 2), (8, 4), (16, 4), (10, 3), (10, 4), (5, 5)])
def test_online_softmax_steps_match_torch_softmax(T, tile):
    g = torch.Generator().manual_seed(T * 10 + tile)
    scores = torch.randn(T, generator=g) * 3
    values = torch.randn(T, 3, generator=g)
    steps = diagrams.online_softmax_steps(scores, tile, values)
    assert [(st["first"], st["last"]) for st in steps] == [
        (j, min(T, j + tile) - 1) for j in range(0, T, tile)
    ]
    m_old = float("-inf")
    for st in steps:
        end = st["last"] + 1
        seen = scores[:end].double()
        m = float(seen.max())
        assert st["m"] == pytest.approx(m) and st["m_old"] == m_old
        assert st["rescale"] == pytest.approx(float(torch.exp(torch.tensor(m_old - m))))
        assert st["l"] == pytest.approx(float(torch.exp(seen - m).sum()))
        torch.testing.assert_close(
            torch.tensor(st["weights"]), torch.softmax(seen, dim=-1), check_dtype=False
        )
        torch.testing.assert_close(
            torch.tensor(st["acc"]),
            torch.exp(seen - m) @ values[:end].double(),
            check_dtype=False,
        )
        m_old = m
    torch.testing.assert_close(
        torch.tensor(steps[-1]["weights"]), torch.softmax(scores, -1), check_dtype=False
    )
    torch.testing.assert_close(
        torch.tensor(steps[-1]["out"]),
        torch.softmax(scores.double(), -1) @ values.double(),
        check_dtype=False,
    )
    assert steps[0]["rescale"] == 0.0 and "acc" not in diagrams.online_softmax_steps(scores, 2)[0]


@pytest.mark.parametrize(("T", "tile"), [(8, 4), (10, 4), (16, 4), (10, 3), (5, 5)])
def test_tiled_softmax_draws_the_numbers_of_every_tile_and_ends_at_the_softmax(T, tile):
    scores = torch.tensor(np.round(np.random.default_rng(T).normal(0, 1.5, T), 1))
    values = torch.tensor(np.random.default_rng(T + 1).integers(-3, 4, T).astype(float))
    fig = diagrams.tiled_softmax(T, tile, scores=scores, values=values)
    n = -(-T // tile)
    for k in range(n):
        end = min(T, (k + 1) * tile)
        m, l, acc = running(scores, values, end)
        assert drawn_number(fig, f"tile max {k}") == pytest.approx(
            float(scores[k * tile : end].max()), abs=5e-4
        )
        assert drawn_number(fig, f"l {k}") == pytest.approx(l, abs=5e-4)
        assert drawn_number(fig, f"acc {k}") == pytest.approx(acc, abs=5e-4)
        (m_text,) = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == f"m {k}"]
        assert float(m_text.split("→")[1]) == pytest.approx(m, abs=5e-4)
    expected = torch.softmax(scores, dim=-1)  # the plain softmax, computed independently
    for j in range(T):
        assert drawn_number(fig, f"weight {j}") == pytest.approx(float(expected[j]), abs=5e-4)
        assert drawn_number(fig, f"score {j}") == pytest.approx(float(scores[j]), abs=5e-4)
    (out,) = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "out"]
    want = float(expected.double() @ values.double())
    assert float(out.split("=")[3].split()[0]) == pytest.approx(want, abs=5e-4)
    # one step alone: the table filled up to that step, the tile read outlined
    single = diagrams.tiled_softmax(T, tile, step=0, scores=scores, values=values)
    gids = [t.get_gid() for t in single.axes[0].texts]
    assert "l 0" in gids and (n == 1 or "l 1" not in gids)
    if n > 1:
        assert "worked step" in gids and "weight 0" not in gids


def test_tiled_softmax_default_row_is_seeded_and_the_same_each_time():
    first = diagrams.tiled_softmax(8, 4)
    again = diagrams.tiled_softmax(8, 4)
    assert texts(first) == texts(again)
    assert "out = acc / l" in texts(diagrams.tiled_softmax(10, 4, step=2))


def test_tiled_softmax_refuses_too_many_steps_to_draw():
    with pytest.raises(ValueError, match="tile=2"):
        diagrams.tiled_softmax(16, 1)
    with pytest.raises(ValueError, match="step=9"):
        diagrams.tiled_softmax(8, 2, step=9)
    with pytest.raises(ValueError, match="T=32"):
        diagrams.tiled_softmax(32, 4)


ALL_DIAGRAMS = {
    "weighted_average": lambda: diagrams.weighted_average([0.2, 0.5, 0.3], ["a", "b", "c"]),
    "qkv_flow": lambda: diagrams.qkv_flow(6, 32, 8),
    "causal_mask_grid": lambda: diagrams.causal_mask_grid(8),
    "mask_before_vs_after": lambda: diagrams.mask_before_vs_after(np.eye(5)),
    "dropout_row": lambda: diagrams.dropout_row(np.full(6, 1 / 6), 0.5),
    "head_split": lambda: diagrams.head_split(16, 128, 8),
    "head_rows": lambda: diagrams.head_rows(32, 4, fused=True),
    "training_setup": lambda: diagrams.training_setup(16, 8, 32, 4),
    "tiled_softmax": lambda: diagrams.tiled_softmax(16, 4),
    "tiled_softmax step": lambda: diagrams.tiled_softmax(10, 4, step=1),
    "qkv_flow unscaled": lambda: diagrams.qkv_flow(6, 32, 8, scaled=False),
    "roadmap": lambda: diagrams.roadmap(highlight=4),
    "llama_block": lambda: diagrams.llama_block(PUBLISHED["Llama 3.1 8B"]),
}


@pytest.mark.parametrize("name", sorted(ALL_DIAGRAMS))
def test_every_diagram_is_readable_and_renders_in_reasonable_time(path, name):
    fig = ALL_DIAGRAMS[name]()
    assert isinstance(fig, LabFigure) and fig.dpi >= 100
    sizes = [t.get_fontsize() for ax in fig.axes for t in ax.texts]
    sizes += [t.get_fontsize() for t in fig.texts]
    assert sizes and min(sizes) >= 9
    if fig._suptitle is not None:
        assert fig._suptitle.get_fontsize() >= 11
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    best = min(render_seconds(ALL_DIAGRAMS[name]()) for _ in range(2))
    assert best < SLOW


def test_head_split_png_is_cached_per_size_and_is_the_same_picture(path):
    first = diagrams.head_split_png(6, 32, 4)
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert diagrams.head_split_png(6, 32, 4) is first  # second visit: from the cache
    assert diagrams.head_split_png(6, 32, 8) != first
    assert first == diagrams.head_split(6, 32, 4)._repr_png_()


def texts_outside_their_box(fig) -> list[str]:
    """Texts that start inside a drawn box but run past its edges (after a real draw)."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    bad = []
    for ax in fig.axes:
        boxes = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_gid()]
        for text in ax.texts:
            x, y = ax.transData.transform(text.get_position())
            extent = text.get_window_extent(renderer)
            for box in boxes:
                edge = box.get_window_extent(renderer)
                if edge.contains(x, y) and not (
                    edge.x0 <= extent.x0 and extent.x1 <= edge.x1 and edge.y0 <= extent.y0
                ):
                    bad.append(f"{text.get_text()!r} in {box.get_gid()}")
    return bad


@pytest.mark.parametrize(
    "make",
    [
        lambda: diagrams.qkv_flow(6, 4, 4),
        lambda: diagrams.qkv_flow(16, 512, 64),  # two- and three-digit sizes
        lambda: diagrams.qkv_flow(128, 4096, 128),
        lambda: diagrams.training_setup(64, 12, 32, 4),
        lambda: diagrams.training_setup(50_000, 1024, 128, 8),
    ],
)
def test_box_labels_fit_inside_their_boxes_even_with_long_sizes(path, make):
    assert texts_outside_their_box(make()) == []


def test_weighted_average_counts_only_terms_with_weight():
    fig = diagrams.weighted_average([0.5, 0.5, 0.0], ["a", "b", "c"], query=1)
    assert "(3 tokens, 2 with weight > 0)" in texts(fig)
    assert "(2 terms)" in texts(diagrams.weighted_average([0.5, 0.5], ["a", "b"]))


def test_dropout_label_sits_below_the_rows_clear_of_the_arrows():
    fig = diagrams.dropout_row(np.full(6, 1 / 6), 0.5)
    (ax,) = fig.axes
    (label,) = [t for t in ax.texts if t.get_text().startswith("keep each")]
    lowest_cell = min(p.get_y() for p in ax.patches if p.get_gid() in ("kept", "dropped"))
    assert label.get_position()[1] < lowest_cell and label.get_va() == "top"


# The module diagrams.py became a package (one module per lesson); notebooks and the explorer
# import these names from ``attention_lab.viz.diagrams``, with these signatures.
OLD_PUBLIC_API = {
    "causal_mask_grid": "(T: 'int') -> 'LabFigure'",
    "draw_head_split": "(ax, T: 'int', D: 'int', H: 'int', B: 'int' = 1) -> 'list'",
    "dropout_row": "(weights_row, p: 'float', seed: 'int' = 0) -> 'LabFigure'",
    "head_rows": "(D: 'int', H: 'int', fused: 'bool' = False) -> 'LabFigure'",
    "head_split": "(T: 'int', D: 'int', H: 'int', B: 'int' = 1, ax=None) -> 'LabFigure'",
    "head_split_png": "(T: 'int', D: 'int', H: 'int', B: 'int' = 1) -> 'bytes'",
    "mask_before_vs_after": "(scores) -> 'LabFigure'",
    "qkv_flow": "(T: 'int', D: 'int', d_head: 'int') -> 'LabFigure'",
    "tiled_softmax": "(T: 'int', tile: 'int', step: 'int | None' = None) -> 'LabFigure'",
    "training_setup": "(vocab_size: 'int', T: 'int', D: 'int', H: 'int') -> 'LabFigure'",
    "weighted_average": (
        "(weights, tokens: 'Sequence[str] | None' = None, query=None) -> 'LabFigure'"
    ),
}
OLD_CONSTANTS = {
    "ARROW": "#444444",
    "EDGE": "#333333",
    "NEUTRAL": "#E8E8E8",
    "MAX_HEADS": 8,
    "MAX_D": 128,
}


def test_every_public_name_of_the_old_module_is_still_importable_with_its_signature():
    import attention_lab.viz.diagrams as package

    for name, signature in OLD_PUBLIC_API.items():
        now = inspect.signature(getattr(package, name))
        old = signature[1 : signature.rindex(") ->")].split(", ")  # the old parameters
        params = list(now.parameters.values())
        # the old parameters first, unchanged; anything added has a default (keywords)
        assert [str(p) for p in params[: len(old)]] == old, name
        assert all(p.default is not p.empty for p in params[len(old) :]), name
        assert str(now.return_annotation) == signature.rsplit("-> ", 1)[1].strip("'"), name
    for name, value in OLD_CONSTANTS.items():
        assert getattr(package, name) == value
    assert set(package.__all__) >= set(OLD_PUBLIC_API) | set(OLD_CONSTANTS)
    assert hasattr(package.head_split_png, "cache_info")  # still the cached PNG


# -- the roadmap -------------------------------------------------------------------------


def edge(patch) -> str:
    return to_hex(patch.get_edgecolor())


@pytest.mark.parametrize("n", sorted(NOTEBOOKS))
def test_the_roadmap_highlights_the_parts_of_the_notebook_asked_for(n):
    from attention_lab.viz.diagrams.roadmap import HIGHLIGHT, PARTS

    fig = diagrams.roadmap(highlight=n)
    (ax,) = fig.axes
    lit = {p.get_gid() for p in ax.patches if edge(p) == HIGHLIGHT.lower()}
    tags = {g for g in lit if g.startswith("notebook")}
    assert tags == {f"notebook {n:02d}"}  # its own tag(s), no other notebook's
    assert lit - tags == set(PARTS[n])  # exactly the parts it builds
    assert f"you are here: {n:02d}" in fig.get_suptitle()
    plain = diagrams.roadmap()
    assert not any(edge(p) == HIGHLIGHT.lower() for p in plain.axes[0].patches)


def test_the_roadmap_places_every_notebook_and_marks_what_the_tiny_model_leaves_out():
    fig = diagrams.roadmap()
    (ax,) = fig.axes
    gids = [p.get_gid() for p in ax.patches]
    assert {f"notebook {n:02d}" for n in NOTEBOOKS} <= set(gids)
    assert set(NOTEBOOKS) == set(range(1, 12))
    assert NOTEBOOKS[10] == "two layers: induction heads"
    assert NOTEBOOKS[11] == "real text: MLP, residuals, layer norm"
    by_gid = {p.get_gid(): p for p in ax.patches}
    for left_out in ("ln1", "ln2", "mlp", "residual 1", "residual 2", "ln_f"):
        assert by_gid[left_out].get_linestyle() == "--", left_out  # dashed: not in TinyLM
    for built in ("embedding", "attention", "linear", "softmax"):
        assert by_gid[built].get_linestyle() == "-", built
    # the chapter's layer is filled; the left-out parts are not grey and not striped
    assert to_hex(by_gid["attention"].get_facecolor()) != "#ffffff"
    for patch in ax.patches:
        assert to_hex(patch.get_facecolor()) != BLOCKED_COLOR.lower() and not patch.get_hatch()
    # top to bottom: embedding, attention, MLP, linear, softmax
    ys = [by_gid[g].get_y() for g in ("embedding", "attention", "mlp", "linear", "softmax")]
    assert ys == sorted(ys, reverse=True)
    shown = texts(fig)
    for words in ("multi-head causal self-attention", "LayerNorm", "MLP", "softmax", "linear"):
        assert words in shown
    assert "left out of the tiny model" in shown


def test_the_roadmap_fits_a_laptop_and_refuses_a_notebook_it_does_not_know(path):
    fig = diagrams.roadmap(highlight=6)
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= 1280 and h <= 800
    assert texts_outside_their_box(fig) == []
    with pytest.raises(ValueError, match=r"pass one of 1, 2, .*, 9, .*11"):
        diagrams.roadmap(highlight=12)
    with pytest.raises(ValueError, match="notebook number"):
        diagrams.roadmap(highlight="04")


# -- a Llama block (notebook 12) ---------------------------------------------------------


def lit_gids(fig) -> set[str]:
    from attention_lab.viz.diagrams.llama import HIGHLIGHT

    return {p.get_gid() for p in fig.axes[0].patches if edge(p) == HIGHLIGHT.lower()}


@pytest.mark.parametrize("name", ["Llama 3.1 8B", "Llama 3.1 70B", "Qwen2.5-7B", "Mistral 7B v0.1"])
def test_the_llama_block_draws_the_models_own_head_counts_and_cache(name):
    model = PUBLISHED[name]
    fig = diagrams.llama_block(model)
    shown = texts(fig)
    H, n_kv, d, D = model.n_heads, model.n_kv_heads, model.d_head, model.d_model
    assert f"q_proj: {D} → {H} query heads × {d}" in shown
    assert f"k_proj, v_proj: {D} → {n_kv} heads × {d} each" in shown
    assert f"each k/v head serves {H // n_kv} query heads" in shown
    assert f"o_proj: {H} heads × {d} → {D}" in shown
    assert f"× {model.n_layers} layers" in shown
    per_token = cache_bytes(model, 1, bytes_per_element=2)
    assert per_token == model.n_layers * 2 * n_kv * d * 2  # the formula, worked by hand
    assert f"= {per_token:,} bytes" in shown
    assert f"would need {per_token * H // n_kv:,}" in shown  # every query head its own k, v
    assert name in fig.get_suptitle()


def test_the_llama_block_tags_exactly_the_lessons_parts_and_dashes_what_the_chapter_skips():
    from attention_lab.viz.diagrams.llama import LESSON_PARTS

    fig = diagrams.llama_block(PUBLISHED["Llama 3.1 8B"])
    lit = lit_gids(fig)
    tags = {g for g in lit if g.startswith("tag ")}
    assert (
        tags == {f"tag {name}" for name in LESSON_PARTS} == {"tag GQA", "tag RoPE", "tag KV cache"}
    )
    steps = {gid for gids in LESSON_PARTS.values() for gid in gids}
    assert (
        lit - tags - {"key lesson"}
        == steps
        == {"step k v", "step rope", "step cache", "step repeat"}
    )
    by_gid = {p.get_gid(): p for p in fig.axes[0].patches}
    for left_out in ("ln1", "ln2", "mlp", "ln_f"):
        assert by_gid[left_out].get_linestyle() == "--", left_out
    for built in ("embedding", "attention", "step q", "step attend", "step o", "linear"):
        assert by_gid[built].get_linestyle() == "-", built
    # in the zoom, top to bottom: q, k and v, RoPE, the cache, repeat_kv, attention, o_proj
    order = (
        "step q",
        "step k v",
        "step rope",
        "step cache",
        "step repeat",
        "step attend",
        "step o",
    )
    ys = [by_gid[g].get_y() for g in order]
    assert ys == sorted(ys, reverse=True)
    shown = texts(fig)
    assert "no position table" in shown and "RMSNorm" in shown and "SwiGLU" in shown


def test_the_llama_block_fits_a_laptop_and_refuses_what_it_cannot_draw(path):
    fig = diagrams.llama_block(PUBLISHED["Gemma 2 9B"])
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= 1280 and h <= 800
    assert texts_outside_their_box(fig) == []
    with pytest.raises(ValueError, match="latent attention.*Llama 3.1 8B"):
        diagrams.llama_block(PUBLISHED["DeepSeek-V3"])
    with pytest.raises(TypeError, match="PUBLISHED_MODELS"):
        diagrams.llama_block("Llama 3.1 8B")
    import dataclasses

    odd = dataclasses.replace(PUBLISHED["Llama 3.1 8B"], n_kv_heads=5)
    with pytest.raises(ValueError, match="n_heads=32 is not divisible by n_kv_heads=5"):
        diagrams.llama_block(odd)
