"""Offline reveal.js decks from the notebooks' slide metadata (`tools/slides.py html`).

English decks are built from notebooks/*.ipynb into build/slides/, the Simplified Chinese ones
from notebooks/zh-CN/*.ipynb into build/slides/zh-CN/ (`lang_of` tells by the folder). A
Chinese deck's own words are Chinese too: its <html lang>, its <title> (the notebook's title
heading), the index page, and the labels of reveal.js's speaker view (NOTES_ZH, replaced in
that folder's copy of plugin/notes/notes.js; each must be found, so a reveal.js upgrade that
renames one fails the build instead of leaving English behind). A Chinese deck and its
index page also draw on any machine, one without a CJK font too: the package's font subset
(src/attention_lab/fonts) is copied into the folder's fonts/ with its licence and served as a
web font by a relative URL (the decks work opened from disk), last in every font stack of
the page (tools/catalogues/font.py), so a reader's own CJK font still wins.
"""

from __future__ import annotations

import html as html_lib
import re
import shutil
from pathlib import Path

import nbformat

from tools.catalogues.font import (
    FAMILY,
    JUPYTERLAB_STACKS,
    LICENCE_PATH,
    RESHAPE_CSS,
    RESHAPE_JS,
    REVEAL_STACKS,
    WEIGHTS,
    font_face_css,
    font_path,
    stacks_css,
)
from tools.slide_cells import ROOT, first_heading, slide_type

DECK_DIR = ROOT / "teaching" / "deck"  # template + vendored reveal.js and MathJax
DEFAULT_OUT = ROOT / "build" / "slides"
ZH = "zh-CN"  # notebooks/zh-CN/ -> build/slides/zh-CN/

# The words of a deck that are not the notebook's: nbconvert's language code, the <title>
# suffix, the index page, and the link to the other edition's index.
CHROME = {
    "en": {
        "language_code": "en",
        "html_lang": "en",
        "suffix": " slides",
        "index_title": "Attention Lab slides",
        "index_heading": "Attention Lab: slides",
        "index_help": "Open a deck; arrows or space to move, S for speaker notes, F for full "
        "screen.",
        "other": ("简体中文", f"{ZH}/index.html"),
    },
    ZH: {
        "language_code": "zh",
        "html_lang": "zh-CN",
        "suffix": " · 幻灯片",
        "index_title": "Attention Lab 幻灯片",
        "index_heading": "Attention Lab：幻灯片",
        "index_help": "打开一套幻灯片：方向键或空格翻页，按 S 打开演讲者视图（备注），按 F 全屏。"
        "这些幻灯片由中文版笔记本（notebooks/zh-CN/）生成。",
        "other": ("English", "../index.html"),
    },
}
# reveal.js 5.2.1's speaker view (plugin/notes/notes.js), English -> Chinese, as they appear
# in the file's JavaScript string (quotes escaped).
NOTES_ZH = [
    ("<title>reveal.js - Speaker View</title>", "<title>reveal.js - 演讲者视图</title>"),
    ('<h4 class=\\"label\\">Time <span', '<h4 class=\\"label\\">时间 <span'),
    ("Click to Reset</span>", "点击重置</span>"),
    ("Pacing – Time to finish current slide</h4>", "节奏：讲完本张幻灯片还剩的时间</h4>"),
    ('<h4 class=\\"label\\">Notes</h4>', '<h4 class=\\"label\\">备注</h4>'),
    ('label\\">Upcoming</span>', 'label\\">下一张</span>'),
    ("'default': 'Default'", "'default': '默认'"),
    ("'wide': 'Wide'", "'wide': '横向'"),
    ("'tall': 'Tall'", "'tall': '纵向'"),
    ("'notes-only': 'Notes only'", "'notes-only': '仅备注'"),
    ("layoutLabel.innerHTML = 'Layout'", "layoutLabel.innerHTML = '布局'"),
    ("Loading speaker view...</div>", "正在加载演讲者视图……</div>"),
]


def lang_of(path: Path) -> str:
    """The edition of a notebook: zh-CN for notebooks/zh-CN/*.ipynb, else en."""
    return ZH if path.parent.name == ZH else "en"


def notebook_title(nb, path: Path) -> str:
    """The deck's title: the notebook's first heading, without Markdown emphasis."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (heading := first_heading(cell.source)):
            return re.sub(r"[*_`]", "", heading)
    return path.stem


def _translate_notes(notes_js: Path) -> None:
    text = notes_js.read_text(encoding="utf-8")
    for english, chinese in NOTES_ZH:
        if text.count(english) != 1:
            raise SystemExit(
                f"{notes_js}: the speaker view label {english!r} is not there once; update "
                "NOTES_ZH in tools/slide_decks.py for this reveal.js"
            )
        text = text.replace(english, chinese)
    notes_js.write_text(text, encoding="utf-8")


WEB_FONT = "fonts"  # beside the decks: the subset's two weights and OFL.txt


def web_font_css(out: Path, stacks: dict[str, str]) -> str:
    """Copy the package's font subset to out/fonts/; the <style> that serves it to a page
    in `out` (a relative URL: it works from a file:// address) and puts it in `stacks`."""
    (out / WEB_FONT).mkdir(parents=True, exist_ok=True)
    for source in [font_path(weight) for weight in WEIGHTS] + [LICENCE_PATH]:
        shutil.copyfile(ROOT / source, out / WEB_FONT / source.name)
    faces = font_face_css(lambda weight: f"{WEB_FONT}/{font_path(weight).name}")
    licence = f"/* Attention Lab Sans SC (a subset of Noto Sans CJK SC): {WEB_FONT}/OFL.txt */"
    return f"<style>\n{licence}\n{faces}{stacks_css(stacks)}{RESHAPE_CSS}</style>\n{RESHAPE_JS}"


def _js_string(text: str) -> str:
    """`text` as it must appear inside notes.js's double-quoted string of the speaker view."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _notes_font(notes_js: Path) -> None:
    """The speaker view (a window notes.js writes) draws its Chinese labels and notes with
    the subset too: its stack gains FAMILY, its <head> the @font-face rules (relative URLs
    resolve against the deck's address) and the script that shapes it again."""
    text = notes_js.read_text(encoding="utf-8")
    faces = font_face_css(lambda weight: f"{WEB_FONT}/{font_path(weight).name}")
    css = faces + "select, button { font-family: inherit; }\n" + RESHAPE_CSS
    edits = [
        ("font-family: Helvetica;", f"font-family: Helvetica, sans-serif, '{FAMILY}';"),
        ("\\n\\t\\t</style>\\n\\t</head>",
         _js_string(css) + "\\n\\t\\t</style>\\n" + _js_string(RESHAPE_JS) + "\\t</head>"),
    ]  # fmt: skip
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(
                f"{notes_js}: {old!r} is not there once; update _notes_font in "
                "tools/slide_decks.py for this reveal.js"
            )
        text = text.replace(old, new)
    notes_js.write_text(text, encoding="utf-8")


FIGURE_TAG = "slide-figure"  # the deck template gives its picture most of the slide


def tag_figure_cells(nb) -> list[int]:
    """Tag (in memory) every code cell of one line whose output holds a picture, such as
    ``llama_block(llama)``: when the cell is alone on its slide, with only that line above
    it, the picture may fill most of the slide (the template's ``celltag_slide-figure`` rule)
    instead of the 430 px that leave room for a cell of code. Returns the tagged cells'
    indices."""
    tagged = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or len(cell.source.strip().splitlines()) != 1:
            continue
        if any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            tags = cell.metadata.setdefault("tags", [])
            if FIGURE_TAG not in tags:
                tags.append(FIGURE_TAG)
            tagged.append(i)
    return tagged


def build_html(paths: list[Path], out: Path, lang: str | None = None) -> list[Path]:
    """One offline reveal.js deck per notebook in `out`, with reveal.js and MathJax beside them.

    `lang` ("en" or "zh-CN"; default: that of the first notebook) sets the deck's own words
    (CHROME) and, for zh-CN, the speaker view's labels."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    lang = lang or (lang_of(paths[0]) if paths else "en")
    chrome = CHROME[lang]
    out.mkdir(parents=True, exist_ok=True)
    vendor = DECK_DIR / "vendor"
    for name in ("reveal.js", "mathjax"):
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(vendor / name, target)
    if lang == ZH:
        _translate_notes(out / "reveal.js" / "plugin" / "notes" / "notes.js")
        _notes_font(out / "reveal.js" / "plugin" / "notes" / "notes.js")
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
    c.SlidesExporter.language_code = chrome["language_code"]
    exporter = SlidesExporter(config=c)
    font_css = web_font_css(out, {**JUPYTERLAB_STACKS, **REVEAL_STACKS}) if lang == ZH else ""
    written, titles = [], []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        missing = [i for i, cell in enumerate(nb.cells) if slide_type(cell) is None]
        if missing:
            raise SystemExit(
                f"{path.name}: cells {missing} have no slideshow metadata; "
                f"run `python -m tools.slides assign {path}` first"
            )
        tag_figure_cells(nb)
        title = notebook_title(nb, path)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
        if lang != "en":  # nbconvert writes "<name> slides"; the deck's own title instead
            old = f"<title>{html_lib.escape(path.stem, quote=False)} slides</title>"
            new = f"<title>{html_lib.escape(title + chrome['suffix'], quote=False)}</title>"
            body = body.replace(old, new, 1)
            body = body.replace('<html lang="zh">', f'<html lang="{chrome["html_lang"]}">', 1)
        if font_css:  # last in <head>: after the theme's and JupyterLab's stacks
            body = body.replace("</head>", font_css + "</head>", 1)
        target = out / f"{path.stem}.slides.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
        titles.append(title)
    write_index(out, written, titles, lang)
    return written


def write_index(out: Path, decks: list[Path], titles: list[str], lang: str = "en") -> Path:
    """index.html: one link per deck (its file name in English, its title in Chinese)."""
    chrome = CHROME[lang]
    esc = html_lib.escape
    links = "\n".join(
        f'<li><a href="{p.name}">'
        f"{esc(p.stem.replace('.slides', '') if lang == 'en' else title)}</a></li>"
        for p, title in zip(decks, titles)
    )
    label, href = chrome["other"]
    beside = (out / ZH / "index.html").is_file() if lang == "en" else out.name == ZH
    other = f"<p><a href='{href}'>{esc(label)}</a></p>" if beside else ""  # the other edition
    index = out / "index.html"
    font = web_font_css(out, {"--font": "sans-serif"}) if lang == ZH else ""
    index.write_text(
        f"<!DOCTYPE html><html lang='{chrome['html_lang']}'><head><meta charset='utf-8'>"
        f"<title>{esc(chrome['index_title'])}</title>{font}</head>"
        f"<body style='font:20px var(--font, sans-serif);margin:2em'>"
        f"<h1>{esc(chrome['index_heading'])}</h1>"
        f"<p>{esc(chrome['index_help'])}</p><ul>{links}</ul>{other}</body></html>\n",
        encoding="utf-8",
    )
    return index


REMOTE = re.compile(
    r"""<(?:script|link|img|iframe)\b[^>]*?(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I
)
REMOTE_CSS = re.compile(r"""(?:@import\s+url\(|url\()\s*["']?(?:https?:)?//""", re.I)


def remote_references(html: str) -> list[str]:
    """Tags and CSS rules in `html` that would fetch something from the network."""
    hits = [m.group(0) for m in REMOTE.finditer(html)]
    hits += [m.group(0) for m in REMOTE_CSS.finditer(html)]
    return hits
