"""Jinja2 pages translated from a gettext catalogue (polib), like the notebooks' catalogues.

    page = render_page("summary_sheet.html.j2", catalogue, lang="zh-CN", **data)
    report = update_page_catalogue("summary_sheet.html.j2", catalogue, **data)

One template per page, in English; every word on it goes through the catalogue. In the
template: ``{% trans "page" %}...{% endtrans %}`` for prose (msgctxt "page"), ``pgettext(ctx,
"...")`` for a short literal, and the filter ``text|tr(ctx)`` for text that comes with the data
(table cells). Translations are trusted HTML (they hold ``<code>``), data is escaped.

``render_page`` with ``catalogue=None`` gives English. With a catalogue it refuses, naming each
string, when one is missing, untranslated or fuzzy. ``update_page_catalogue`` finds the strings
by rendering the English page and recording every lookup (so strings that come with the data
are found too), then merges them into the catalogue as `translations.py update` does (fuzzy
matches keep the old translation, flagged; unused entries become obsolete).

Libraries already do most of it: Jinja2's own i18n extension renders and lists the template's
literal strings, polib reads and writes the catalogue. What stays here is what Babel's Jinja2
extractor cannot do: it reads the template's source, so it misses every string that comes with
the data (``text|tr(ctx)``), which is why the strings are recorded while the page renders; and
the strict lookups that refuse a page with a missing or fuzzy string.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import polib

from .common import ROOT, TranslationError, load_catalogue
from .extract import Message
from .merge import merge

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"  # tools/templates/


class _Lookups:
    """gettext for one render: English (catalogue None) or strict lookups in a catalogue."""

    def __init__(self, po: polib.POFile | None):
        self.table = None
        if po is not None:
            self.table = {
                (e.msgctxt, e.msgid): e.msgstr
                for e in po
                if not e.obsolete and e.msgstr and "fuzzy" not in e.flags
            }
        self.seen: dict[tuple[str | None, str], None] = {}  # in order of first use
        self.missing: list[tuple[str | None, str]] = []

    def pgettext(self, context: str | None, message: str) -> str:
        key = (context, message)
        self.seen.setdefault(key)
        if self.table is None:
            return message
        if key not in self.table:
            if key not in self.missing:
                self.missing.append(key)
            return message
        return self.table[key]

    def gettext(self, message: str) -> str:
        return self.pgettext(None, message)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.gettext(singular if n == 1 else plural)

    def npgettext(self, context: str, singular: str, plural: str, n: int) -> str:
        return self.pgettext(context, singular if n == 1 else plural)


def _environment(lookups: _Lookups) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.install_gettext_callables(  # type: ignore[attr-defined]
        lookups.gettext,
        lookups.ngettext,
        newstyle=True,
        pgettext=lookups.pgettext,
        npgettext=lookups.npgettext,
    )
    env.filters["tr"] = lambda text, ctx: lookups.pgettext(ctx, str(text))
    return env


def _render(template: str, lookups: _Lookups, context: dict) -> str:
    return _environment(lookups).get_template(template).render(**context)


def _template_lines(template: str) -> dict[tuple[str | None, str], str]:
    """The line of each literal string of the template (strings from the data have none)."""
    env = _environment(_Lookups(None))
    source = (TEMPLATES / template).read_text(encoding="utf-8")
    lines: dict[tuple[str | None, str], str] = {}
    for lineno, function, message in env.extract_translations(source):
        if function in ("pgettext", "npgettext"):
            key = (message[0], message[1])
        else:
            key = (None, message if isinstance(message, str) else message[0])
        lines.setdefault(key, str(lineno))
    return lines


def render_page(template: str, catalogue: Path | None, **context) -> str:
    """The page in English (``catalogue=None``) or in the catalogue's language."""
    po = None
    if catalogue is not None:
        if not catalogue.exists():
            raise TranslationError(f"{catalogue}: no such catalogue")
        po = load_catalogue(catalogue)
    lookups = _Lookups(po)
    page = _render(template, lookups, context)
    if lookups.missing:
        listed = "\n".join(f"    [{ctx}] {msgid[:70]!r}" for ctx, msgid in lookups.missing)
        raise TranslationError(
            f"{catalogue}: {len(lookups.missing)} strings of {template} missing, untranslated "
            f"or fuzzy (run `python -m tools.summary_sheet --update-catalogue`, then translate "
            f"them in a PO editor):\n{listed}"
        )
    return page


def update_page_catalogue(template: str, catalogue: Path, header: str, **context) -> str:
    """Merge the English page's strings into ``catalogue``; one line saying what it holds."""
    lookups = _Lookups(None)
    _render(template, lookups, context)
    lines = _template_lines(template)  # occurrences: the line, or the file alone for data
    messages = [Message(ctx, msgid, [lines.get((ctx, msgid), "")]) for ctx, msgid in lookups.seen]
    old = load_catalogue(catalogue)
    if not catalogue.exists():
        old.header = header
    merged = merge(old, messages, f"tools/templates/{template}")
    text = str(merged)
    if not catalogue.exists() or catalogue.read_text(encoding="utf-8") != text:
        catalogue.parent.mkdir(parents=True, exist_ok=True)
        catalogue.write_text(text, encoding="utf-8")
    active = [e for e in merged if not e.obsolete]
    done = sum(1 for e in active if e.msgstr and "fuzzy" not in e.flags)
    shown = catalogue.relative_to(ROOT) if catalogue.is_relative_to(ROOT) else catalogue
    return f"{shown}: {len(active)} entries, {done} translated"
