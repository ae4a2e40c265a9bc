"""One printable page that sums up the chapter, with every number computed by the library.

    python -m tools.summary_sheet                 # teaching/summary.html and
                                                  # teaching/zh-CN/summary.html (checked in)
    python -m tools.summary_sheet --lang zh-CN    # only the Simplified Chinese page
    python -m tools.summary_sheet --check         # fail if either checked-in page is stale
    python -m tools.summary_sheet --out DIR       # also DIR/summary.html, DIR/zh-CN/summary.html
    python -m tools.summary_sheet --out DIR --pdf # and the .pdf next to each (headless Chromium)
    python -m tools.summary_sheet --update-catalogue   # the page's strings -> its .po (merge)

Nothing on the sheet is typed in by hand (tools/summary_numbers.py): the shape walk is recorded
from a real forward pass of ``attention_lab.MultiHeadSelfAttention``, the parameter counts come
from building the block and counting, each mask convention is found by running that API with
``causal_mask(T)``, and the cost table uses ``attention_lab.cost``. tests/course/test_slides.py
rebuilds the page and fails when teaching/summary.html is stale;
tests/course/test_summary_sheet_zh.py
does the same for the Simplified Chinese edition, teaching/zh-CN/summary.html (same numbers,
same tables, Chinese prose).

The page is one template, tools/templates/summary_sheet.html.j2, rendered once per language
(tools/catalogues/templates.py); its words in Simplified Chinese are the gettext catalogue
i18n/zh_CN/teaching/summary_sheet.po, edited like the notebooks' catalogues (terms from
i18n/glossary.tsv). Rendering the Chinese page fails, naming the string, while an entry is
missing, untranslated or fuzzy.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from markupsafe import Markup

TOOLS = Path(__file__).resolve().parent
if not __package__:  # run as a file, not as the module tools.summary_sheet
    raise SystemExit("run it from the repository root as a module: python -m tools.summary_sheet")
from tools.catalogues.common import TranslationError  # noqa: E402
from tools.catalogues.font import FAMILY, RESHAPE_CSS, RESHAPE_JS, inline_font_face_css  # noqa: E402
from tools.catalogues.templates import render_page, update_page_catalogue  # noqa: E402
from tools.summary_numbers import page_data  # noqa: E402

ROOT = TOOLS.parent
CHECKED_IN = ROOT / "teaching" / "summary.html"
LANGS = ("en", "zh-CN")
PAGES = {"en": CHECKED_IN, "zh-CN": ROOT / "teaching" / "zh-CN" / "summary.html"}
TEMPLATE = "summary_sheet.html.j2"  # in tools/templates/
CATALOGUES = {"en": None, "zh-CN": ROOT / "i18n" / "zh_CN" / "teaching" / "summary_sheet.po"}
CATALOGUE_HEADER = (
    "Simplified Chinese words of the summary sheet, teaching/zh-CN/summary.html.\n"
    "The English is tools/templates/summary_sheet.html.j2; the numbers come from the library.\n"
    "Translate msgstr only (it is HTML: keep the tags and the %(name)s fields), following\n"
    "i18n/glossary.tsv; then `python -m tools.summary_sheet`."
)

# The chapter's sizes: TinyLM of notebook 08 (d_model=32, n_heads=4, context_length=12),


def render(lang: str = "en") -> str:
    """The sheet as HTML, in English (``lang="en"``) or Simplified Chinese (``"zh-CN"``).

    The Chinese page carries its own font, for a reader (or a printer) without a CJK one:
    the package's subset cut down to the page's characters, inline as data: URLs (the page
    is one file that works from any folder), last in the body's font stack (a reader's
    own CJK font still wins), with the script that shapes the page again once it has
    loaded (tools/catalogues/font.py)."""
    if lang not in LANGS:
        raise ValueError(f"unknown lang={lang!r}: use one of {', '.join(LANGS)}")
    command = "tools/summary_sheet.py" + ("" if lang == "en" else f" --lang {lang}")
    data = {"lang": lang, "command": command, **page_data()}
    page = render_page(TEMPLATE, CATALOGUES[lang], web_font="", font_fallback="", **data)
    if lang == "en":
        return page
    faces = inline_font_face_css(ROOT, page)  # the characters of the page just rendered
    web_font = Markup(f"\n<style>\n{faces}{RESHAPE_CSS}</style>\n{RESHAPE_JS}".rstrip("\n"))
    fallback = Markup(f', "{FAMILY}"')
    return render_page(
        TEMPLATE, CATALOGUES[lang], web_font=web_font, font_fallback=fallback, **data
    )


def update_catalogue() -> str:
    """Merge the template's English strings into the Simplified Chinese catalogue."""
    data = {"lang": "en", "command": "", "web_font": "", "font_fallback": "", **page_data()}
    return update_page_catalogue(TEMPLATE, CATALOGUES["zh-CN"], CATALOGUE_HEADER, **data)


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
            # time for the Chinese page's font to load and the page to be shaped again
            # with it (without it the PDF's headings were boxes: 16 .notdef glyphs)
            "--virtual-time-budget=10000",
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
    parser.add_argument(
        "--update-catalogue",
        action="store_true",
        help="merge the page's English strings into i18n/zh_CN/teaching/summary_sheet.po",
    )
    args = parser.parse_args(argv)
    try:
        if args.update_catalogue:
            print(update_catalogue())
            return 0
        langs = LANGS if args.lang == "all" else (args.lang,)
        pages = {lang: render(lang) for lang in langs}
    except TranslationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.check:
        stale = [
            PAGES[lang]
            for lang, page in pages.items()
            if not PAGES[lang].exists() or PAGES[lang].read_text(encoding="utf-8") != page
        ]
        for path in stale:
            print(f"{path} is stale: run python -m tools.summary_sheet", file=sys.stderr)
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
