"""The font the Chinese figures draw with: a subset of Noto Sans CJK SC, shipped in the package.

DejaVu Sans (matplotlib's own) draws Latin text in both editions; this font supplies only
the characters DejaVu lacks that some translation can put in a figure: the msgstr of the
library's catalogues and of every notebook catalogue (so a figure title in a code cell,
or a label a learner copies from the prose, is covered). `build` regenerates it with
fontTools from Debian's fonts-noto-cjk when that set of characters changes; `check` fails
when a needed character is missing from the shipped file (no source font needed).
"""

from __future__ import annotations

from pathlib import Path

from .common import LOCALE, TranslationError, load_catalogue

WEIGHTS = ("Regular", "Bold")  # bold: the figures' titles and emphasised labels
SOURCE_FAMILY = "Noto Sans CJK SC"
FONT_DIR = Path("src/attention_lab/fonts")
FONT_PATH = FONT_DIR / "AttentionLabSansSC-Regular.otf"
LICENCE_PATH = Path("src/attention_lab/fonts/OFL.txt")
FAMILY = "Attention Lab Sans SC"
# Always present, so a learner's own figure can use the usual CJK punctuation.
BASE = "，。：；？！、（）《》“”‘’…—～·「」【】％＋－×÷→←↑↓√"


def _latin_cmap() -> set[int]:
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    path = font_manager.findfont("DejaVu Sans", fallback_to_default=False)
    return set(TTFont(path)["cmap"].getBestCmap())


def needed_characters(root: Path) -> set[str]:
    """Characters of the Chinese text that DejaVu Sans cannot draw."""
    text = BASE
    for po_path in sorted((root / "i18n" / LOCALE).rglob("*.po")):
        if "teaching" in po_path.parts:
            continue  # the guide and slides are HTML/Markdown, read in a browser
        for entry in load_catalogue(po_path):
            if not entry.obsolete:
                text += entry.msgstr
    latin = _latin_cmap()
    return {c for c in text if _is_cjk(c) and ord(c) not in latin}


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
    base = Path("/usr/share/fonts/opentype/noto")
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
        "fonts-noto-cjk (apt-get install fonts-noto-cjk) and run `make translations` again"
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
    return found
