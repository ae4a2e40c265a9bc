"""`build`: the Chinese notebooks written from the English ones and their catalogues."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import polib

from tools import badges
from tools.notebook_io import write_notebook

from .common import (
    CODE_STRING,
    COMMENT,
    LANG_DIR,
    MARKDOWN,
    TranslationError,
    catalogue_path,
    load_catalogue,
    read_notebook,
    translated_path,
)
from .extract import Message, extract, is_generated, notebook_context, replace_code
from .literal_check import literal_problem
from .literals import parse_cell

# ---------------------------------------------------------------- build

_LINK = re.compile(r"(\]\(|\b(?:src|href)=\")([^)\s\"]+)")


def fix_links(markdown: str, notebook_names: set[str]) -> str:
    """Links written for notebooks/ made right for notebooks/zh-CN/."""

    def fix(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", target, flags=re.IGNORECASE):
            return m.group(0)  # absolute URL, anchor or absolute path
        path = target.split("#", 1)[0]
        if path in notebook_names:
            return m.group(0)  # a sibling notebook: its translation sits beside us
        return m.group(1) + "../" + target

    return _LINK.sub(fix, markdown)


def _lookup(po: polib.POFile) -> dict[tuple[str, str], polib.POEntry]:
    return {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}


def problems(po: polib.POFile, messages: list[Message]) -> dict[str, list[str]]:
    table = _lookup(po)
    out: dict[str, list[str]] = {"missing": [], "untranslated": [], "fuzzy": []}
    for msg in messages:
        entry = table.get((msg.msgctxt, msg.msgid))
        kind = (
            "missing"
            if entry is None
            else "fuzzy"
            if "fuzzy" in entry.flags
            else "untranslated"
            if not entry.msgstr
            else None
        )
        if kind:
            out[kind].append(f"cell {msg.cells[0]} [{msg.msgctxt}]: {_short(msg.msgid)}")
    return out


def literal_problems(po: polib.POFile, messages: list[Message], name: str) -> list[str]:
    """Each translated code-string entry whose msgstr cannot stand in for the English literal."""
    table = _lookup(po)
    out = []
    for msg in messages:
        entry = table.get((msg.msgctxt, msg.msgid))
        if msg.msgctxt != CODE_STRING or entry is None or not entry.msgstr:
            continue
        if "fuzzy" in entry.flags:
            continue
        why = literal_problem(msg.msgid, entry.msgstr)
        if why:
            out.append(
                f"{name} cell {msg.cells[0]} [code-string] {_short(msg.msgid, 60)}: {why} "
                f"(fix msgstr {_short(entry.msgstr, 60)!r} in i18n/zh_CN/"
                f"{name.removesuffix('.ipynb')}.po)"
            )
    return out


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# Shown at the top of a Chinese notebook while some of its text keeps the English because
# the English changed after it was translated (fuzzy) or is new (untranslated): the reader
# sees that the translation is behind, instead of a silently stale one.
# Added to the end of the Colab setup cell (tagged colab-setup) of every Chinese notebook: the
# library's own text (figures, checker feedback, tables it prints) in Chinese too.
SET_LANGUAGE = (
    "\n\nimport attention_lab\n\n"
    'attention_lab.set_language("zh_CN")  # 图、检查器反馈和库打印的表格都用中文'
)

PENDING_NOTICE = (
    "\n\n> **译文待更新：** 英文版修改后，本笔记本有 {n} 处文字尚未重新翻译，暂以英文原文显示"
    "（i18n/zh_CN/{stem}.po 中标为 fuzzy 或未翻译的条目）。"
)


def translate_notebook(nb, po: polib.POFile, name: str, notebook_names: set[str]):
    """The Chinese notebook (a copy); untranslated or fuzzy entries keep the English, and
    then the title cell says how many places are waiting for a translation."""
    table = _lookup(po)
    pending = 0

    def tr(ctx: str, text: str) -> str:
        nonlocal pending
        entry = table.get((ctx, text))
        if entry is None or not entry.msgstr or "fuzzy" in entry.flags:
            pending += 1
            return text
        return entry.msgstr

    def literal(index: int, text: str) -> str:
        new = tr(CODE_STRING, text)
        why = literal_problem(text, new) if new != text else None
        if why:
            raise TranslationError(
                f"{name} cell {index} [code-string] {_short(text, 60)}: {why} "
                f"(fix its msgstr in i18n/zh_CN/{name.removesuffix('.ipynb')}.po)"
            )
        return new

    out = copy.deepcopy(nb)
    context = notebook_context(nb)
    title = None
    for index, cell in enumerate(out["cells"]):
        if cell["cell_type"] == "markdown":
            if is_generated(cell):
                cell["source"] = badges.badge_source(f"{LANG_DIR}/{name}")
            elif cell["source"].strip():
                cell["source"] = fix_links(tr(MARKDOWN, cell["source"]), notebook_names)
                title = cell if title is None else title
        elif cell["cell_type"] == "code":
            source = replace_code(
                cell["source"],
                lambda t: tr(COMMENT, t),
                lambda s, i=index: literal(i, s.text),
                context,
            )
            if "colab-setup" in cell.get("metadata", {}).get("tags", []):
                source = source.rstrip("\n") + SET_LANGUAGE
            try:
                parse_cell(source)
            except SyntaxError as err:
                raise TranslationError(
                    f"{name} cell {index}: the translated code does not parse ({err}); check "
                    "the cell's code-string and code-comment translations"
                ) from err
            cell["source"] = source
    if pending and title is not None:
        stem = name.removesuffix(".ipynb")
        title["source"] = title["source"].rstrip("\n") + PENDING_NOTICE.format(n=pending, stem=stem)
    return out


def build_one(
    root: Path, path: Path, allow_untranslated: bool = False, allow_pending: bool = False
):
    """``allow_pending``: entries marked for retranslation (fuzzy or untranslated, as
    `update` leaves them) keep the English, and the title says so; English that `update`
    has not merged yet (no entry at all) still refuses."""
    nb = read_notebook(path)
    po = load_catalogue(catalogue_path(root, path))
    if not catalogue_path(root, path).exists() and not allow_untranslated:
        raise TranslationError(f"{path.name}: no catalogue; run `translations.py update` first")
    messages = extract(nb)
    broken = literal_problems(po, messages, path.name)
    if broken:
        raise TranslationError("\n".join(broken))
    bad = problems(po, messages)
    if allow_pending and not allow_untranslated:
        bad = {"missing": bad["missing"], "untranslated": [], "fuzzy": []}
    if any(bad.values()) and not allow_untranslated:
        counts = ", ".join(f"{len(v)} {k}" for k, v in bad.items() if v)
        detail = "\n".join(f"    {k}: {line}" for k, v in bad.items() for line in v[:5])
        raise TranslationError(f"{path.name}: {counts}\n{detail}")
    names = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    return translate_notebook(nb, po, path.name, names)


def build(
    root: Path,
    notebooks: list[Path],
    allow_untranslated: bool,
    run: bool,
    allow_pending: bool = False,
) -> list[str]:
    errors, built = [], []
    for path in notebooks:
        try:
            built.append((path, build_one(root, path, allow_untranslated, allow_pending)))
        except TranslationError as err:
            errors.append(str(err))
    if errors:
        raise TranslationError(
            "refusing to build (translate these in the catalogues, or pass "
            "--allow-untranslated to keep the English):\n" + "\n".join(errors)
        )
    report = []
    for path, nb in built:
        target = translated_path(root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_notebook(nb, target, cleaned=False)  # outputs as in the English
        report.append(f"wrote {target.relative_to(root)}")
    if run:
        from tools import run_notebooks  # needs nbclient and a kernel; imported only here

        for path, _ in built:
            seconds = run_notebooks.run(translated_path(root, path))
            report.append(f"{seconds:6.1f} s  ran {LANG_DIR}/{path.name}")
    return report
