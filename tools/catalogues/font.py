"""The font of the Chinese figures and pages: a subset of Noto Sans CJK SC, in the package.

DejaVu Sans (matplotlib's own) draws Latin text in both editions; this font supplies only
the characters DejaVu lacks that some translation can put in a figure: the msgstr of the
library's catalogues and of every notebook catalogue (so a figure title in a code cell,
or a label a learner copies from the prose, is covered). The project's own Chinese pages
serve the same file as a web font, last in their font stacks (a reader's CJK font still
wins): the explorer in Voila and its presenter view (a copy in the template's static files,
WEB_FONT_DIR), the offline slide decks (tools/slide_decks.py copies it beside them) and the
summary sheet (tools/summary_sheet.py inlines a subset of it). So the characters of those
pages count too (PAGE_SOURCES: the template's and the decks' own words, the built Chinese
notebooks the decks and the app show, cells and printed outputs, the summary sheet's
catalogue). `build` regenerates the subset with fontTools from Debian's fonts-noto-cjk
(or the folder ATTENTION_LAB_NOTO_DIR names, e.g. the package unpacked with `dpkg -x`) when
that set of characters changes, and refreshes the template's copy; `check` fails when a
needed character is missing from the shipped file or the copy differs from it (no source
font needed).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
from pathlib import Path

from .common import LOCALE, TranslationError, load_catalogue

WEIGHTS = ("Regular", "Bold")  # bold: the figures' titles and emphasised labels
SOURCE_FAMILY = "Noto Sans CJK SC"
FONT_DIR = Path("src/attention_lab/fonts")
FONT_PATH = FONT_DIR / "AttentionLabSansSC-Regular.otf"
LICENCE_PATH = Path("src/attention_lab/fonts/OFL.txt")
FAMILY = "Attention Lab Sans SC"
# The Voila template's copy (its static files are served from that folder only: Tornado
# refuses a link that leads out of it), byte for byte the shipped file, with its licence.
WEB_FONT_DIR = Path("share/jupyter/voila/templates/attention-lab/static/fonts")
# Pages the project serves in Chinese whose words are not all in a catalogue: every CJK
# character of these files must be in the font (globs, relative to the repository).
PAGE_SOURCES = (
    "share/jupyter/voila/templates/attention-lab/*.j2",  # the presenter link
    "tools/slide_decks.py",  # the decks' titles, index page and speaker view (CHROME, NOTES_ZH)
    "notebooks/zh-CN/*.ipynb",  # what the decks and the app show, printed outputs included
)
PAGE_CATALOGUES = ("teaching/summary_sheet.po",)  # under i18n/zh_CN/: the summary sheet
# Always present, so a learner's own figure can use the usual CJK punctuation.
BASE = "，。：；？！、（）《》“”‘’…—～·「」【】％＋－×÷→←↑↓√"


def _latin_cmap() -> set[int]:
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    path = font_manager.findfont("DejaVu Sans", fallback_to_default=False)
    return set(TTFont(path)["cmap"].getBestCmap())


def needed_characters(root: Path) -> set[str]:
    """Characters of the Chinese text that DejaVu Sans cannot draw."""
    text = BASE + page_text(root)
    for po_path in sorted((root / "i18n" / LOCALE).rglob("*.po")):
        page = po_path.relative_to(root / "i18n" / LOCALE).as_posix() in PAGE_CATALOGUES
        if "teaching" in po_path.parts and not page:
            continue  # the guide is Markdown, read on GitHub or in JupyterLab
        for entry in load_catalogue(po_path):
            if not entry.obsolete:
                text += entry.msgstr
    latin = _latin_cmap()
    return {c for c in text if _is_cjk(c) and ord(c) not in latin}


def page_text(root: Path) -> str:
    """The text of PAGE_SOURCES: a notebook's cell sources and text outputs, a file's text."""
    parts = []
    for pattern in PAGE_SOURCES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            if path.suffix != ".ipynb":
                parts.append(text)
                continue
            for cell in json.loads(text)["cells"]:
                parts.append("".join(cell["source"]))
                for output in cell.get("outputs", []):
                    parts.append("".join(output.get("text", "")))
                    data = output.get("data", {})
                    for mime in ("text/plain", "text/html", "text/markdown"):
                        parts.append("".join(data.get(mime, "")))
    return "".join(parts)


# Chinese characters and the punctuation and symbols around them; not emoji (a notebook's
# prose may use one, but no figure draws it, and no CJK font has them).
_RANGES = ((0x2000, 0x22FF), (0x2460, 0x24FF), (0x25A0, 0x25FF), (0x2E80, 0x30FF),
           (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F),
           (0xFF00, 0xFFEF))  # fmt: skip


def _is_cjk(c: str) -> bool:
    return any(lo <= ord(c) <= hi for lo, hi in _RANGES) and not c.isspace()


def font_path(weight: str) -> Path:
    return FONT_DIR / f"AttentionLabSansSC-{weight}.otf"


def source_fonts(weight: str) -> tuple[Path, ...]:
    base = Path(os.environ.get("ATTENTION_LAB_NOTO_DIR", "/usr/share/fonts/opentype/noto"))
    return (base / f"NotoSansCJK-{weight}.ttc", base / f"NotoSansCJKsc-{weight}.otf")


def shipped_characters(root: Path, weight: str = "Regular") -> set[str]:
    from fontTools.ttLib import TTFont

    path = root / font_path(weight)
    if not path.exists():
        return set()
    return {chr(c) for c in TTFont(path)["cmap"].getBestCmap()}


def _source_font(weight: str):
    from fontTools.ttLib import TTCollection, TTFont

    for path in source_fonts(weight):
        if not path.exists():
            continue
        fonts = TTCollection(str(path)).fonts if path.suffix == ".ttc" else [TTFont(str(path))]
        for font in fonts:
            if font["name"].getDebugName(1) == SOURCE_FAMILY:
                return font
    raise TranslationError(
        "the Chinese text uses characters the shipped font lacks, and no source font to "
        f"subset was found ({', '.join(map(str, source_fonts(weight)))}): install Debian's "
        "fonts-noto-cjk (apt-get install fonts-noto-cjk), or unpack it without installing "
        "(apt-get download fonts-noto-cjk; dpkg -x fonts-noto-cjk_*.deb DIR) and set "
        "ATTENTION_LAB_NOTO_DIR=DIR/usr/share/fonts/opentype/noto, then run "
        "`make translations` again"
    )


def build_font(root: Path) -> list[str]:
    """Write each weight's subset when the needed characters changed; else leave the file
    alone (fontTools stamps a modification time, so rewriting would change the bytes)."""
    need = needed_characters(root)
    report = []
    for weight in WEIGHTS:
        if shipped_characters(root, weight) == need:
            report.append(f"{font_path(weight)}: already current ({len(need)} characters)")
        else:
            report.append(_build_one(root, weight, need))
    return report + copy_web_font(root)


def copy_web_font(root: Path) -> list[str]:
    """Refresh the Voila template's copy of the fonts and their licence."""
    report = []
    for source in [font_path(w) for w in WEIGHTS] + [LICENCE_PATH]:
        target = root / WEB_FONT_DIR / source.name
        if not target.exists() or target.read_bytes() != (root / source).read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / source, target)
            report.append(f"wrote {WEB_FONT_DIR / source.name} (a copy of {source})")
    return report


def _build_one(root: Path, weight: str, need: set[str]) -> str:
    from fontTools import subset

    font = _source_font(weight)
    options = subset.Options()
    options.layout_features = ["vert", "vrt2"]  # none needed for horizontal labels
    options.hinting = False
    options.desubroutinize = False
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in need))
    subsetter.subset(font)
    _rename(font, weight)
    target = root / font_path(weight)
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(str(target))
    return f"wrote {font_path(weight)}: {len(need)} characters, {target.stat().st_size:,} bytes"


def _rename(font, weight: str) -> None:
    """A modified OFL font must not keep its name if it is reserved; we rename it anyway,
    so it never shadows a full Noto Sans CJK SC the reader has installed."""
    names = font["name"]
    postscript = FAMILY.replace(" ", "") + "-" + weight
    for record in names.names:
        if record.nameID in (1, 16):
            record.string = FAMILY
        elif record.nameID == 4:
            record.string = f"{FAMILY} {weight}"
        elif record.nameID == 6:
            record.string = postscript
        elif record.nameID == 3:
            record.string = f"{FAMILY} {weight} subset"
    if "CFF " in font:
        cff = font["CFF "].cff
        cff.fontNames = [postscript]
        top = cff.topDictIndex[0]
        top.FamilyName = FAMILY
        top.FullName = f"{FAMILY} {weight}"


def check_font(root: Path) -> list[str]:
    found = []
    need = needed_characters(root)
    for weight in WEIGHTS:
        missing = need - shipped_characters(root, weight)
        if missing:
            sample = "".join(sorted(missing)[:20])
            found.append(
                f"{font_path(weight)} lacks {len(missing)} characters the translations use "
                f"({sample}…): run `make translations` (needs Debian's fonts-noto-cjk)"
            )
    for source in [font_path(w) for w in WEIGHTS] + [LICENCE_PATH]:
        copy = root / WEB_FONT_DIR / source.name
        if not copy.exists() or copy.read_bytes() != (root / source).read_bytes():
            found.append(
                f"{WEB_FONT_DIR / source.name} is not a copy of {source} (the explorer would "
                "serve another font): run `python -m tools.translations build`"
            )
    return found


# ---------------------------------------------------------------- as a web font

# The subset's ranges as a CSS unicode-range: a page without such a character never
# downloads the font.
UNICODE_RANGE = ", ".join(f"U+{lo:04X}-{hi:04X}" for lo, hi in _RANGES)
CSS_WEIGHTS = {"Regular": 400, "Bold": 700}


# The font stacks of the pages the project serves, as the CSS variables that hold them:
# JupyterLab 4's (the explorer in Voila, the cells of a deck) and reveal.js's white theme
# (a deck's slides). stacks_css puts FAMILY last in each; the Voila template says the same
# by hand (a template cannot import this).
JUPYTERLAB_STACKS = {
    "--jp-ui-font-family": 'system-ui, -apple-system, blinkmacsystemfont, "Segoe UI", '
    'helvetica, arial, sans-serif, "Apple Color Emoji", "Segoe UI Emoji", "Segoe UI Symbol"',
    "--jp-content-font-family": "var(--jp-ui-font-family)",
    "--jp-code-font-family": 'menlo, consolas, "DejaVu Sans Mono", monospace',
}
REVEAL_STACKS = {
    "--r-main-font": '"Source Sans Pro", Helvetica, sans-serif',
    "--r-heading-font": '"Source Sans Pro", Helvetica, sans-serif',
    "--r-code-font": "monospace",
}


# Chromium (156 here) keeps the shapes of text it laid out while a web font that is not
# first in the stack was still loading: the boxes stay after the font has loaded, for that
# text in that font description (headings, drawn first, stayed boxes; text added later did
# not). Once every face of FAMILY has loaded, this script gives <html> a class that changes
# the description (text-rendering: optimizeLegibility, which draws as Chromium's default
# does, kerning and ligatures on), so the page is shaped again with the font. It starts
# when the page first needs the font: an English page never loads it.
LOADED_CLASS = "attention-lab-font-loaded"
RESHAPE_CSS = f"html.{LOADED_CLASS} {{ text-rendering: optimizeLegibility; }}\n"
RESHAPE_JS = (
    "<script>\n(function () {\n"
    f'  var family = "{FAMILY}", started = false;\n'
    '  function ours(face) { return face.family.replace(/["\']/g, "") === family; }\n'
    '  document.fonts.addEventListener("loadingdone", function (event) {\n'
    "    if (started || !event.fontfaces.some(ours)) return;\n"
    "    started = true;\n"
    "    var faces = Array.from(document.fonts).filter(ours);\n"
    "    Promise.all(faces.map(function (face) { return face.load(); })).then(function () {\n"
    f'      document.documentElement.classList.add("{LOADED_CLASS}");\n'
    "    });\n"
    "  });\n"
    "})();\n</script>\n"
)


def stacks_css(stacks: dict[str, str]) -> str:
    """body { --variable: its stack, FAMILY; ... }: a character no font before it has (the
    reader's own, a system CJK font included) is drawn with the subset, not as a box."""
    lines = "".join(
        f"  {name}: {stack}" + ("" if stack.startswith("var(") else f', "{FAMILY}"') + ";\n"
        for name, stack in stacks.items()
    )
    return "body {\n" + lines + "}\n"


def font_face_css(url_for) -> str:
    """@font-face rules for both weights of FAMILY; `url_for(weight)` is each file's URL."""
    return "".join(
        f'@font-face {{ font-family: "{FAMILY}"; src: url("{url_for(weight)}") '
        f'format("opentype"); font-weight: {CSS_WEIGHTS[weight]}; font-display: swap; '
        f"unicode-range: {UNICODE_RANGE}; }}\n"
        for weight in WEIGHTS
    )


def inline_font_face_css(root: Path, text: str) -> str:
    """@font-face rules with data: URLs of the shipped font cut down to the CJK characters of
    `text` (a page that must work from any folder, or printed, as one file). The same text
    gives the same bytes, also after the shipped file is rebuilt with more characters (its
    glyphs keep their CIDs; the modification time is the source font's creation time)."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    latin = _latin_cmap()  # what DejaVu Sans draws is not in the subset (needed_characters)
    chars = sorted({ord(c) for c in text if _is_cjk(c)} - latin)
    urls = {}
    for weight in WEIGHTS:
        font = TTFont(root / font_path(weight), recalcTimestamp=False)
        have = set(font.getBestCmap())
        missing = [chr(c) for c in chars if c not in have]
        if missing:
            raise TranslationError(
                f"{font_path(weight)} lacks {''.join(missing[:20])}: add the page's text to "
                "PAGE_SOURCES or PAGE_CATALOGUES in tools/catalogues/font.py and run "
                "`python -m tools.translations build`"
            )
        options = subset.Options()
        options.layout_features = []
        options.hinting = False
        options.desubroutinize = False
        options.name_IDs = ["*"]
        options.notdef_outline = True
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=chars)
        subsetter.subset(font)
        font["head"].modified = font["head"].created  # not when the shipped file was built
        buffer = io.BytesIO()
        font.save(buffer)
        urls[weight] = "data:font/otf;base64," + base64.b64encode(buffer.getvalue()).decode()
    return font_face_css(urls.__getitem__)
