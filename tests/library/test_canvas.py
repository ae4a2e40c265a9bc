"""The figure canvas (canvas.py, _mpl_fast.py): PNG encoding, labels drawn from the text
cache, heatmap cells painted by numpy, the blocked-cell stripes; on both drawing paths."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.image import AxesImage
from matplotlib.patches import PathPatch
from PIL import Image

from attention_lab import plot_heads
from attention_lab.viz import _mpl_fast, diagrams
from attention_lab.viz._mpl_fast import LabCanvas
from attention_lab.viz.canvas import (
    BLOCKED_HATCH,
    LabFigure,
    cell_image,
    mask_cells,
    png_bytes,
    stripes_path,
    to_png,
)
from attention_lab.viz.cells import CellImage
from attention_lab.viz.headgrid import HeadGrid
from attention_lab.viz.palette import BLOCKED_HATCH_COLOR


@pytest.fixture
def fast():
    """The fast path, checked afresh (and the check forgotten afterwards)."""
    _mpl_fast.use_plain_agg(False)
    assert _mpl_fast.fast_path(), _mpl_fast.status()
    yield
    _mpl_fast.use_plain_agg(False)


@pytest.fixture(params=["fast", "plain"])
def path(request):
    """Each drawing path in turn: the fast one and the plain-Agg fallback."""
    _mpl_fast.use_plain_agg(request.param == "plain")
    assert _mpl_fast.fast_path() == (request.param == "fast"), _mpl_fast.status()
    yield request.param
    _mpl_fast.use_plain_agg(False)


def test_png_bytes_keeps_every_pixel():
    import io

    from PIL import Image

    from attention_lab.viz.canvas import png_bytes

    rgba = np.random.default_rng(0).integers(0, 256, (37, 53, 4), dtype=np.uint8)
    decoded = np.asarray(Image.open(io.BytesIO(png_bytes(rgba))))
    np.testing.assert_array_equal(decoded, rgba)  # RGBA in, RGBA out
    rgb = np.ascontiguousarray(rgba[..., :3])
    decoded = np.asarray(Image.open(io.BytesIO(png_bytes(rgb))))
    np.testing.assert_array_equal(decoded, rgb)  # RGB in, RGB out
    with pytest.raises(ValueError, match="expected"):
        png_bytes(rgba[..., :2])


# -- the string-caching canvas (_mpl_fast.LabCanvas, the fast path) ----------------------


def _text_figure(canvas_class=None):
    """Labels of several sizes, colours, angles and lines, on white."""
    fig = LabFigure(figsize=(4, 3), dpi=100)
    if canvas_class is not None:
        canvas_class(fig)
    fig.text(0.05, 0.85, "scores (6, 6)", fontsize=10)
    fig.text(0.05, 0.65, "scores (6, 6)", fontsize=16, color="#AA3377")
    fig.text(0.05, 0.35, "two\nlines", fontsize=11, weight="bold")
    fig.text(0.85, 0.2, "query i", fontsize=11, rotation=90)
    return fig


def _ink_boxes(rgba):
    """How many pixels are inked, and the bounding box (rows, columns) of all of them."""
    ink = np.asarray(rgba)[..., :3].min(-1) < 200  # (h, w) True where drawn
    rows, cols = np.nonzero(ink)
    return ink.sum(), (rows.min(), rows.max(), cols.min(), cols.max())


def test_cached_labels_look_like_matplotlibs_own(fast):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    ours = _text_figure()
    assert isinstance(ours.canvas, LabCanvas)
    first = np.asarray(ours._repr_png_() and ours.canvas.buffer_rgba()).copy()
    second = np.asarray(ours._repr_png_() and ours.canvas.buffer_rgba()).copy()  # from the cache
    assert np.array_equal(first, second)
    stock = _text_figure(FigureCanvasAgg)
    stock.canvas.draw()
    theirs = np.asarray(stock.canvas.buffer_rgba())
    (ink_ours, box_ours), (ink_theirs, box_theirs) = _ink_boxes(first), _ink_boxes(theirs)
    assert abs(ink_ours - ink_theirs) <= 0.05 * ink_theirs  # the same glyphs...
    assert max(abs(a - b) for a, b in zip(box_ours, box_theirs)) <= 2  # ...in the same place
    assert png_bytes(first).startswith(b"\x89PNG")


def test_cached_labels_keep_size_and_colour_apart(fast):
    fig = LabFigure(figsize=(3, 1), dpi=100)
    small = fig.text(0.02, 0.5, "weights", fontsize=9, color="black")
    big = fig.text(0.5, 0.5, "weights", fontsize=18, color="#CC6677")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert isinstance(fig.canvas, LabCanvas)
    w_small = small.get_window_extent(renderer).width
    w_big = big.get_window_extent(renderer).width
    assert 1.8 < w_big / w_small < 2.2  # twice the size, twice as wide
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    right = pixels[:, 150:]
    reddish = (right[..., 0] - right[..., 2] > 40).sum()
    assert reddish > 50  # the second one is drawn in its own colour, not the first one's


@pytest.mark.parametrize(("T", "n_panels", "dpi"), [(6, 3, 100), (16, 4, 150), (5, 1, 150)])
def test_cell_image_paints_what_matplotlibs_resampling_paints(fast, T, n_panels, dpi):
    """HeadGrid's numpy-painted heatmaps against matplotlib's own AxesImage: the same
    pixel everywhere except the one-pixel rim where the panel edge cuts a pixel (matplotlib
    blends it, the frame covers it)."""
    import matplotlib

    rng = np.random.default_rng(T)
    weights = rng.random((n_panels, T, T))
    causal = np.triu(np.ones((T, T), bool), 1)
    grid = HeadGrid(n_panels, T, dpi=dpi)  # stripes are a path, not part of the image
    grid.update(weights, mask=causal)
    assert all(isinstance(im, CellImage) for im in grid.images)
    grid.figure.canvas.draw()
    ours = np.asarray(grid.figure.canvas.buffer_rgba()).copy()
    for image in grid.images:
        image.__class__ = AxesImage  # matplotlib's resampling from here on
    grid.figure.canvas.draw()
    theirs = np.asarray(grid.figure.canvas.buffer_rgba())
    differ = (ours != theirs).any(-1)  # (height, width)
    height = grid.figure.bbox.height
    rim = np.zeros_like(differ)
    for ax in grid.axes:
        x0, y0, x1, y1 = ax.bbox.extents
        top, bottom = height - y1, height - y0  # buffer rows count from the top
        inner = np.zeros_like(differ)
        inner[int(top) + 2 : int(bottom) - 1, int(x0) + 2 : int(x1) - 1] = True
        outer = np.zeros_like(differ)
        outer[int(top) - 1 : int(bottom) + 2, int(x0) - 1 : int(x1) + 2] = True
        rim |= outer & ~inner
    assert differ.sum() > 0 or dpi == 100  # (fractional edges exist at these sizes)
    # a pixel whose centre lies exactly on a cell edge: matplotlib 3.11 gives it to the
    # earlier cell, as we do; 3.10 (Colab's) to the later one, one pixel over
    nearby = np.zeros_like(differ)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            nearby |= (ours == np.roll(theirs, (dy, dx), axis=(0, 1))).all(-1)
    assert not (~nearby & ~rim).any(), f"{(~nearby & ~rim).sum()} pixels differ inside panels"
    if tuple(int(v) for v in matplotlib.__version__.split(".")[:2]) >= (3, 11):
        assert not (differ & ~rim).any(), f"{(differ & ~rim).sum()} pixels differ inside panels"


# -- both paths --------------------------------------------------------------------------


def test_each_path_draws_on_its_own_canvas_and_image(path):
    fig = LabFigure(figsize=(2, 2), dpi=100)
    image = cell_image(fig.add_subplot(), np.eye(3))
    if path == "fast":
        assert type(fig.canvas) is LabCanvas and type(image) is CellImage
    else:
        assert type(fig.canvas) is FigureCanvasAgg and type(image) is AxesImage
    png = fig._repr_png_()
    assert png == to_png(fig) and png[:8] == b"\x89PNG\r\n\x1a\n"
    decoded = np.asarray(Image.open(io.BytesIO(png)))
    np.testing.assert_array_equal(decoded, np.asarray(fig.canvas.buffer_rgba()))


def test_a_heatmap_and_a_diagram_look_the_same_on_both_paths():
    """The fallback is the same picture: identical outside the labels, labels within a
    pixel of each other (matplotlib 3.11 places each glyph on a subpixel, the cache whole
    strings on whole pixels; on 3.10 the two are identical)."""
    w = np.random.default_rng(0).random((2, 6, 6))
    causal = np.triu(np.ones((6, 6), bool), 1)
    pictures = {}
    for plain in (False, True):
        _mpl_fast.use_plain_agg(plain)
        for name, make in (
            ("heatmap", lambda: plot_heads(w, tokens=list("abcdef"), mask=causal)),
            ("diagram", lambda: diagrams.causal_mask_grid(6)),
        ):
            fig = make()
            fig.canvas.draw()
            pictures[name, plain] = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    _mpl_fast.use_plain_agg(False)
    for name in ("heatmap", "diagram"):
        fast, plain = pictures[name, False], pictures[name, True]
        assert fast.shape == plain.shape
        darkness = (255 - fast.min(-1)).sum(), (255 - plain.min(-1)).sum()
        assert darkness[0] == pytest.approx(darkness[1], rel=0.02), name  # the same ink
        differ = (fast != plain).any(-1)
        assert differ.mean() < 0.03, (name, differ.mean())  # only around the labels


# -- the blocked-cell stripes, one way everywhere -------------------------------------------


def test_mask_cells_joins_the_blocked_cells_of_a_row():
    mask = np.array([[0, 1, 1], [0, 0, 1], [1, 0, 1]], bool)
    assert mask_cells(mask) == [(0.5, -0.5, 2.0, 1.0), (1.5, 0.5, 1.0, 1.0),
                                (-0.5, 1.5, 1.0, 1.0), (1.5, 1.5, 1.0, 1.0)]  # fmt: skip
    assert mask_cells(np.zeros((2, 2), bool)) == []
    path = stripes_path(mask_cells(mask))
    assert len(path.vertices) == 4 * 5  # 4 rectangles, 4 corners + close each


def test_heatmaps_and_diagrams_stripe_blocked_cells_the_same_way():
    causal = np.triu(np.ones((5, 5), bool), 1)
    heat = plot_heads(np.full((1, 5, 5), 0.2), mask=causal)
    grid = diagrams.causal_mask_grid(5)
    before_after = diagrams.mask_before_vs_after(np.eye(5))

    def stripes(fig):
        return [
            p
            for ax in fig.axes
            for p in ax.patches
            if isinstance(p, PathPatch) and p.get_hatch() and p.get_visible()
        ]

    for fig in (heat, grid, before_after):
        found = stripes(fig)
        assert found, fig
        for patch in found:
            assert patch.get_hatch() == BLOCKED_HATCH
            assert patch.get_edgecolor()[:3] == pytest.approx(
                tuple(int(BLOCKED_HATCH_COLOR[i : i + 2], 16) / 255 for i in (1, 3, 5))
            )
    (heat_stripes,) = stripes(heat)
    covered = sum(w * h for *_, w, h in mask_cells(causal))
    assert covered == causal.sum()  # the heatmap's stripes cover exactly the blocked cells
    assert len(heat_stripes.get_path().vertices) == 5 * len(mask_cells(causal))
    legend = heat.legends[0].get_patches()[0]
    assert legend.get_hatch() == BLOCKED_HATCH  # and its legend swatch is the same hatch
