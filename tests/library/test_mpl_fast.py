"""The guard around the figures' fast path (_mpl_fast.py): checked once, and any missing
internal, failing probe or mismatch means plain Agg -- the figures still render.

A matplotlib release that renames a private attribute is simulated by hiding the attribute
from every caller outside matplotlib (``rename_outside_matplotlib``): matplotlib's own code
keeps finding it, as it would under its new name. Deleting it outright would not simulate a
release: matplotlib's own Agg text path calls ``FontManager._find_fonts_by_props`` too, so
plain matplotlib could not draw a label either (``test_deleting_it_outright_breaks_...``).
"""

from __future__ import annotations

import io
import sys

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontManager, FontProperties, fontManager
from PIL import Image

from attention_lab import plot_heads, plot_loss
from attention_lab.viz import _mpl_fast, diagrams
from attention_lab.viz.canvas import LabFigure

PINNED = ("3.10.0", "3.11.2")  # Colab's (tools/colab_widgets_check.sh) and constraints.txt's


@pytest.fixture(autouse=True)
def _check_afresh():
    """Every test decides the path anew, and leaves the next one to decide again."""
    _mpl_fast.use_plain_agg(False)
    yield
    _mpl_fast.use_plain_agg(False)


def four_figure_kinds() -> dict[str, bytes]:
    """The four figure kinds of the issue, as the PNGs a notebook stores."""
    w = np.random.default_rng(0).random((2, 5, 5))
    return {
        "plot_heads": plot_heads(w, tokens=list("abcde"), causal=True)._repr_png_(),
        "qkv_flow": diagrams.qkv_flow(6, 32, 8)._repr_png_(),
        "causal_mask_grid": diagrams.causal_mask_grid(6)._repr_png_(),
        "plot_loss": plot_loss([4.0, 2.0, 1.0], chance=4.16)._repr_png_(),
    }


def assert_all_render(pngs: dict[str, bytes], like: dict[str, bytes] | None = None) -> None:
    for name, png in pngs.items():
        pixels = np.asarray(Image.open(io.BytesIO(png)))
        assert pixels.ndim == 3 and pixels.shape[0] >= 100, name
        assert (pixels[..., :3] < 128).any(), f"{name}: nothing drawn"
        if like is not None:
            assert png == like[name], f"{name} differs from plain Agg's"


def rename_outside_matplotlib(monkeypatch, cls: type, name: str) -> None:
    """Hide ``cls.name`` from code outside matplotlib, as a release renaming it would."""
    original = cls.__getattribute__

    def __getattribute__(self, attr):
        if attr == name:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not caller.startswith("matplotlib"):
                raise AttributeError(f"{cls.__name__!r} object has no attribute {attr!r}")
        return original(self, attr)

    monkeypatch.setattr(cls, "__getattribute__", __getattribute__)


@pytest.mark.skipif(matplotlib.__version__ not in PINNED, reason="an unpinned matplotlib")
def test_the_pinned_matplotlib_versions_pass_the_check_and_draw_fast():
    assert _mpl_fast.fast_path(), _mpl_fast.status()
    assert _mpl_fast.status() == "fast"
    assert type(LabFigure().canvas) is _mpl_fast.LabCanvas


def test_the_environment_variable_and_the_function_force_plain_agg(monkeypatch):
    monkeypatch.setenv(_mpl_fast.ENV_VAR, "1")
    _mpl_fast.use_plain_agg(False)  # forget: check again, now with the variable set
    assert not _mpl_fast.fast_path()
    assert _mpl_fast.ENV_VAR in _mpl_fast.status()
    assert type(LabFigure().canvas) is FigureCanvasAgg
    monkeypatch.delenv(_mpl_fast.ENV_VAR)
    _mpl_fast.use_plain_agg(True)
    assert not _mpl_fast.fast_path() and "use_plain_agg" in _mpl_fast.status()


def test_the_check_runs_once_per_process(monkeypatch):
    calls = []
    probe = _mpl_fast._probe_mismatch
    monkeypatch.setattr(_mpl_fast, "_probe_mismatch", lambda: calls.append(1) or probe())
    for _ in range(3):
        LabFigure()._repr_png_()
    assert len(calls) == 1


def test_a_renamed_font_lookup_falls_back_to_plain_agg_and_every_figure_kind_renders(monkeypatch):
    _mpl_fast.use_plain_agg(True)
    plain = four_figure_kinds()  # the reference: plain Agg, nothing renamed
    rename_outside_matplotlib(monkeypatch, FontManager, "_find_fonts_by_props")
    with pytest.raises(AttributeError):  # the simulation bites: the fast path's font key
        _mpl_fast._key("a label", FontProperties(size=10), 100)
    _mpl_fast.use_plain_agg(False)
    with pytest.warns(RuntimeWarning, match="_find_fonts_by_props is missing"):
        assert not _mpl_fast.fast_path()
    assert_all_render(four_figure_kinds(), like=plain)  # 4 of 4, pixel for pixel plain Agg


def test_a_renamed_renderer_method_falls_back_too(monkeypatch):
    rename_outside_matplotlib(monkeypatch, RendererAgg, "_prepare_font")
    with pytest.warns(RuntimeWarning, match="_prepare_font is missing"):
        assert not _mpl_fast.fast_path()
    assert_all_render(four_figure_kinds())


def test_a_probe_that_draws_differently_falls_back(monkeypatch):
    def misplaced(self, s, prop, antialiased):
        bitmap, x, y, descent = original(self, s, prop, antialiased)
        return bitmap, x + 5, y, descent  # every label five pixels to the right

    original = _mpl_fast._CachedTextRenderer._rasterise
    monkeypatch.setattr(_mpl_fast._CachedTextRenderer, "_rasterise", misplaced)
    with pytest.warns(RuntimeWarning, match="ink differs"):
        assert not _mpl_fast.fast_path()
    assert "ink differs" in _mpl_fast.status()
    assert_all_render(four_figure_kinds())


def test_a_probe_that_raises_falls_back(monkeypatch):
    def broken(self, *args, **kwargs):
        raise TypeError("draw_text_image() takes 5 arguments (a changed signature)")

    monkeypatch.setattr(_mpl_fast._CachedTextRenderer, "draw_text", broken)
    with pytest.warns(RuntimeWarning, match="the probe figure failed: TypeError"):
        assert not _mpl_fast.fast_path()
    assert_all_render(four_figure_kinds())


def test_deleting_it_outright_breaks_plain_matplotlib_too(monkeypatch):
    monkeypatch.delattr(FontManager, "_find_fonts_by_props")
    assert not hasattr(fontManager, "_find_fonts_by_props")
    fig = Figure()
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.5, "plain matplotlib")
    with pytest.raises(AttributeError):
        fig.canvas.draw()


def test_a_fast_draw_that_fails_after_the_check_is_drawn_by_plain_agg(monkeypatch):
    assert _mpl_fast.fast_path()  # the check passed ...

    def broken(self, s, prop, antialiased):
        raise RuntimeError(f"FreeType cannot lay out {s!r}")  # ... then one label fails

    monkeypatch.setattr(_mpl_fast._CachedTextRenderer, "_rasterise", broken)
    fig = LabFigure(figsize=(3, 1))
    fig.text(0.1, 0.5, "an unusual label")
    with pytest.warns(RuntimeWarning, match="cannot lay out"):
        png = fig._repr_png_()  # this figure: the label drawn by matplotlib's own path
    assert_all_render({"the figure": png})
    assert not _mpl_fast.fast_path() and "a fast draw failed" in _mpl_fast.status()
    assert type(LabFigure().canvas) is FigureCanvasAgg  # later figures: plain Agg
