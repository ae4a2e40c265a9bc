"""Offline reveal.js decks from the notebooks' slide metadata (`tools/slides.py html`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
from slide_cells import ROOT, slide_type

DECK_DIR = ROOT / "teaching" / "deck"  # template + vendored reveal.js and MathJax
DEFAULT_OUT = ROOT / "build" / "slides"


def build_html(paths: list[Path], out: Path) -> list[Path]:
    """One offline reveal.js deck per notebook in `out`, with reveal.js and MathJax beside them."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    out.mkdir(parents=True, exist_ok=True)
    vendor = DECK_DIR / "vendor"
    for name in ("reveal.js", "mathjax"):
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(vendor / name, target)
    shutil.copy(vendor / "README.md", out / "THIRD-PARTY-LICENSES.md")
    c = Config()
    c.SlidesExporter.reveal_url_prefix = "reveal.js"
    c.SlidesExporter.reveal_theme = "white"
    c.SlidesExporter.reveal_transition = "none"
    c.SlidesExporter.reveal_scroll = True
    c.SlidesExporter.reveal_number = "c/t"
    c.SlidesExporter.reveal_width = "1200"
    c.SlidesExporter.reveal_height = "800"
    c.SlidesExporter.mathjax_url = "mathjax/tex-svg.js"
    c.SlidesExporter.extra_template_basedirs = [str(DECK_DIR / "templates")]
    c.SlidesExporter.template_name = "attention-lab-offline"
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    exporter = SlidesExporter(config=c)
    written = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        missing = [i for i, cell in enumerate(nb.cells) if slide_type(cell) is None]
        if missing:
            raise SystemExit(
                f"{path.name}: cells {missing} have no slideshow metadata; "
                f"run `python tools/slides.py assign {path}` first"
            )
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
        target = out / f"{path.stem}.slides.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
    index = out / "index.html"
    links = "\n".join(
        f'<li><a href="{p.name}">{p.stem.replace(".slides", "")}</a></li>' for p in written
    )
    index.write_text(
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Attention Lab slides"
        "</title></head><body style='font:20px sans-serif;margin:2em'><h1>Attention Lab: slides"
        "</h1><p>Open a deck; arrows or space to move, S for speaker notes, F for full screen."
        f"</p><ul>{links}</ul></body></html>\n",
        encoding="utf-8",
    )
    return written


REMOTE = re.compile(
    r"""<(?:script|link|img|iframe)\b[^>]*?(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I
)
REMOTE_CSS = re.compile(r"""(?:@import\s+url\(|url\()\s*["']?(?:https?:)?//""", re.I)


def remote_references(html: str) -> list[str]:
    """Tags and CSS rules in `html` that would fetch something from the network."""
    hits = [m.group(0) for m in REMOTE.finditer(html)]
    hits += [m.group(0) for m in REMOTE_CSS.finditer(html)]
    return hits
