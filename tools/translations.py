"""The Simplified Chinese edition: gettext catalogues in, notebooks/zh-CN/ out.

    python tools/translations.py update            # English -> i18n/zh_CN/<stem>.po (merge, fuzzy)
    python tools/translations.py build [--run]     # catalogues -> notebooks/zh-CN/<name>.ipynb
    python tools/translations.py check             # exit 1 on untranslated/fuzzy/stale/out-of-date
    python tools/translations.py glossary-check    # exit 1 on an English glossary term in Chinese

Every subcommand takes notebook paths (default: every notebooks/*.ipynb) and `--root DIR`
(default: this repository), so tests can work on a copy in a temporary directory.

One catalogue per notebook, read and written with polib, so any PO editor (Poedit, Weblate,
Crowdin) can be used. Entries are keyed by the English text:

- msgctxt "markdown": one entry per markdown cell, msgid = the cell's whole source
  (the Colab badge cell is generated, not translated);
- msgctxt "code-comment": one entry per prose comment in a code cell, msgid = the comment text
  after "# ". A leading shape such as "(B, T, D)" stays outside the entry; comments that are only
  shapes, code or a single word (a token label such as "# cat") are not extracted. Code is never
  translated.

`update` merges as msgmerge does: an English text that changed finds its closest old entry
(difflib ratio >= FUZZY_RATIO), whose translation is carried over and flagged fuzzy with the old
English kept as "#| msgid"; entries no longer used are kept as obsolete ("#~") when translated.
In occurrences, the number after the notebook name is the cell index, not a line.

`build` writes the English notebook with every markdown cell and code comment replaced by its
translation (code, outputs and metadata unchanged; the badge points at notebooks/zh-CN/;
relative links to files outside notebooks/ get one more "../"). It refuses when an entry is
untranslated or fuzzy unless --allow-untranslated (which leaves the English, for testing).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import io
import json
import re
import sys
import time
import tokenize
import types
from dataclasses import dataclass, field
from pathlib import Path

import polib

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))


def _import_badges():
    """tools/badges.py, without paying for its module-level `import nbformat` (seconds here:
    jsonschema's format checkers), which badge_source() does not use. Once badges.py imports
    nbformat inside main(), this is a plain import."""
    if "nbformat" in sys.modules:
        import badges

        return badges
    placeholder = types.ModuleType("nbformat", "not loaded by tools/translations.py")
    sys.modules["nbformat"] = placeholder
    try:
        import badges
    finally:
        if sys.modules.get("nbformat") is placeholder:
            del sys.modules["nbformat"]
    return badges


badges = _import_badges()

ROOT = TOOLS.parent
LANG_DIR = "zh-CN"  # notebooks/zh-CN/
LOCALE = "zh_CN"  # i18n/zh_CN/
FUZZY_RATIO = 0.6
MARKDOWN, COMMENT = "markdown", "code-comment"
HEADER = {
    "Project-Id-Version": "attention-lab",
    "Language": LOCALE,
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
    "Plural-Forms": "nplurals=1; plural=0;",
}


class TranslationError(Exception):
    """A problem the user must fix; the message says what and how."""


# --------------------------------------------------------------------------- paths


def english_notebooks(root: Path, paths: list[str] | None = None) -> list[Path]:
    if paths:
        out = [Path(p).resolve() for p in paths]
        for p in out:
            if not p.is_file():
                raise TranslationError(f"{p}: no such notebook")
            if p.parent.name == LANG_DIR:
                raise TranslationError(f"{p}: pass the English notebook, not the {LANG_DIR} one")
        return out
    return sorted((root / "notebooks").glob("*.ipynb"))


def catalogue_path(root: Path, notebook: Path) -> Path:
    return root / "i18n" / LOCALE / f"{notebook.stem}.po"


def translated_path(root: Path, notebook: Path) -> Path:
    return root / "notebooks" / LANG_DIR / notebook.name


# --------------------------------------------------------------------------- notebook files
# Plain json, written byte for byte as nbformat writes it (checked in the tests): importing
# nbformat costs seconds here (jsonschema's format checkers), longer than all the work.


def read_notebook(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    if nb.get("nbformat") != 4:
        raise TranslationError(f"{path}: nbformat {nb.get('nbformat')}, expected 4")
    for cell in nb["cells"]:
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return nb


def dumps_notebook(nb: dict) -> str:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(True)
    text = json.dumps(nb, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)
    return text + "\n"


# --------------------------------------------------------------------------- comments

_SHAPE = r"\([\w\s,+\-*/.]*\)"
_SHAPE_PREFIX = re.compile(rf"^{_SHAPE}(?:\s*(?:@|->|→|\*|×)\s*{_SHAPE})*(?:\s*[,;:])?\s*")
_WORD = re.compile(r"(?<![\w.])[A-Za-z]{2,}(?![\w(])")
_PRAGMA = re.compile(r"^(noqa|type:|fmt:|pragma|ruff:|pylint:|isort:)", re.IGNORECASE)


def split_comment(body: str) -> tuple[str, str] | None:
    """Split a comment's text (after "# ") into (kept prefix, prose) or None when not prose.

    >>> split_comment("(T, T)  1 on and below the diagonal")
    ('(T, T)  ', '1 on and below the diagonal')
    >>> split_comment("(T, T) @ (T, D) -> (T, D)") is None
    True
    """
    if _PRAGMA.match(body):
        return None
    match = _SHAPE_PREFIX.match(body)
    prefix = match.group(0) if match else ""
    prose = body[len(prefix) :]
    if len(_WORD.findall(prose)) < 2 or prose.startswith(("{", "[")):
        return None  # code, a shape, or a one-word label such as "cat"
    return prefix, prose


@dataclass
class Comment:
    row: int  # 0-based line in the cell
    col: int  # column of "#"
    text: str  # whole comment token, "# ..."
    prefix: str  # "# " + kept shape prefix
    prose: str  # the msgid


def code_comments(source: str) -> list[Comment]:
    """Prose comments of a code cell, found with the tokenizer (so '#' inside strings is safe)."""
    lines = source.splitlines(keepends=True)
    # IPython magics and shell escapes are not Python; blank them for the tokenizer.
    masked = "".join(
        re.sub(r"[^\n]", " ", ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in lines
    )
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(masked).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as err:
        raise TranslationError(f"cannot tokenize a code cell ({err}):\n{source[:200]}") from err
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        raw = tok.string
        body = raw[1:].removeprefix(" ")
        if raw.startswith("#!") or raw.startswith("#|"):
            continue
        parts = split_comment(body)
        if parts is None:
            continue
        keep, prose = parts
        lead = raw[: len(raw) - len(body)]
        found.append(Comment(tok.start[0] - 1, tok.start[1], raw, lead + keep, prose))
    return found


def replace_comments(source: str, translate) -> str:
    """Source with each prose comment replaced by translate(prose); code bytes unchanged."""
    comments = code_comments(source)
    if not comments:
        return source
    lines = source.splitlines(keepends=True)
    for c in comments:
        line = lines[c.row]
        end = c.col + len(c.text)
        lines[c.row] = line[: c.col] + c.prefix + translate(c.prose) + line[end:]
    return "".join(lines)


# --------------------------------------------------------------------------- extraction


@dataclass
class Message:
    msgctxt: str
    msgid: str
    cells: list[int] = field(default_factory=list)


def is_generated(cell) -> bool:
    return "colab-badge" in cell.get("metadata", {}).get("tags", [])


def extract(nb) -> list[Message]:
    """Translatable strings of one notebook, in order, each (msgctxt, msgid) once."""
    found: dict[tuple[str, str], Message] = {}
    for index, cell in enumerate(nb["cells"]):
        kind, source = cell["cell_type"], cell["source"]
        if kind == "markdown" and not is_generated(cell) and source.strip():
            keys = [(MARKDOWN, source)]
        elif kind == "code":
            keys = [(COMMENT, c.prose) for c in code_comments(source)]
        else:
            keys = []
        for key in keys:
            found.setdefault(key, Message(*key)).cells.append(index)
    return list(found.values())


# --------------------------------------------------------------------------- merge


def new_catalogue() -> polib.POFile:
    po = polib.POFile(wrapwidth=0)
    po.header = (
        "Simplified Chinese text of one Attention Lab notebook (see tools/translations.py).\n"
        "Translate msgstr only, following i18n/glossary.tsv; then `make translations`.\n"
        "In occurrences, the number after the notebook is a cell index."
    )
    po.metadata = dict(HEADER)
    return po


def load_catalogue(path: Path) -> polib.POFile:
    if not path.exists():
        return new_catalogue()
    try:
        return polib.pofile(str(path), wrapwidth=0)
    except (OSError, ValueError) as err:
        raise TranslationError(
            f"{path}: not a readable PO file ({err}); fix it in a PO editor"
        ) from err


def _closest(msg: Message, candidates: list[polib.POEntry]) -> polib.POEntry | None:
    best, best_ratio = None, FUZZY_RATIO
    for old in candidates:
        if old.msgctxt != msg.msgctxt or not old.msgstr:
            continue
        matcher = difflib.SequenceMatcher(None, old.msgid, msg.msgid, autojunk=False)
        if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio >= best_ratio:
            best, best_ratio = old, ratio
    return best


def merge(
    po: polib.POFile,
    messages: list[Message],
    source_name: str,
    compendium: dict[tuple[str, str], polib.POEntry] | None = None,
) -> polib.POFile:
    """A new catalogue for `messages`, carrying translations over from `po` like msgmerge.

    `compendium` (reviewed entries of the other catalogues) fills a new entry whose English is
    word for word the same elsewhere, e.g. the setup cell's comments or the exercises notebook,
    which make_exercises.py writes from the solutions; like `msgmerge --compendium`, not fuzzy.
    """
    compendium = compendium or {}
    active = {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}
    obsolete = {(e.msgctxt, e.msgid): e for e in po if e.obsolete}
    out = new_catalogue()
    out.metadata.update({k: v for k, v in po.metadata.items() if k not in HEADER})
    out.header = po.header or out.header
    used: set[tuple[str, str]] = set()
    for msg in messages:
        key = (msg.msgctxt, msg.msgid)
        occurrences = [(source_name, str(i)) for i in msg.cells]
        old = active.get(key) or obsolete.get(key)
        if old is not None:
            entry = copy.deepcopy(old)
            entry.obsolete = False
            used.add(key)
        else:
            entry = polib.POEntry(msgctxt=msg.msgctxt, msgid=msg.msgid, msgstr="")
            candidates = list(active.values()) + list(obsolete.values())
            if key in compendium:
                entry.msgstr = compendium[key].msgstr
                entry.tcomment = compendium[key].tcomment
            elif (near := _closest(msg, candidates)) is not None:
                entry.msgstr = near.msgstr
                entry.flags = ["fuzzy"]
                entry.previous_msgctxt = None
                entry.previous_msgid = near.msgid
                entry.tcomment = near.tcomment
        entry.occurrences = occurrences
        out.append(entry)
    for key, old in list(active.items()) + list(obsolete.items()):
        if key in used or not old.msgstr or any(e.msgid == old.msgid for e in out if e.obsolete):
            continue
        gone = copy.deepcopy(old)
        gone.obsolete, gone.occurrences = True, []
        out.append(gone)
    return out


def update(root: Path, notebooks: list[Path]) -> list[str]:
    report = []
    compendium: dict[tuple[str, str], polib.POEntry] = {}

    def remember(po: polib.POFile) -> None:
        for e in po:
            if not e.obsolete and e.msgstr and "fuzzy" not in e.flags:
                compendium.setdefault((e.msgctxt, e.msgid), e)

    for other in sorted((root / "i18n" / LOCALE).glob("*.po")):
        remember(load_catalogue(other))
    for path in notebooks:
        nb = read_notebook(path)
        target = catalogue_path(root, path)
        old = load_catalogue(target)
        merged = merge(old, extract(nb), f"notebooks/{path.name}", compendium)
        remember(merged)
        text = str(merged)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        active = [e for e in merged if not e.obsolete]
        report.append(
            f"{target.relative_to(root)}: {len(active)} entries, "
            f"{sum(1 for e in active if e.msgstr and 'fuzzy' not in e.flags)} translated, "
            f"{sum(1 for e in active if 'fuzzy' in e.flags)} fuzzy, "
            f"{sum(1 for e in active if not e.msgstr)} untranslated, "
            f"{sum(1 for e in merged if e.obsolete)} obsolete"
        )
    return report


# --------------------------------------------------------------------------- build

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


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def translate_notebook(nb, po: polib.POFile, name: str, notebook_names: set[str]):
    """The Chinese notebook (a copy); untranslated or fuzzy entries keep the English."""
    table = _lookup(po)

    def tr(ctx: str, text: str) -> str:
        entry = table.get((ctx, text))
        if entry is None or not entry.msgstr or "fuzzy" in entry.flags:
            return text
        return entry.msgstr

    out = copy.deepcopy(nb)
    for cell in out["cells"]:
        if cell["cell_type"] == "markdown":
            if is_generated(cell):
                cell["source"] = badges.badge_source(f"{LANG_DIR}/{name}")
            elif cell["source"].strip():
                cell["source"] = fix_links(tr(MARKDOWN, cell["source"]), notebook_names)
        elif cell["cell_type"] == "code":
            cell["source"] = replace_comments(cell["source"], lambda t: tr(COMMENT, t))
    return out


def build_one(root: Path, path: Path, allow_untranslated: bool = False):
    nb = read_notebook(path)
    po = load_catalogue(catalogue_path(root, path))
    if not catalogue_path(root, path).exists() and not allow_untranslated:
        raise TranslationError(f"{path.name}: no catalogue; run `translations.py update` first")
    bad = problems(po, extract(nb))
    if any(bad.values()) and not allow_untranslated:
        counts = ", ".join(f"{len(v)} {k}" for k, v in bad.items() if v)
        detail = "\n".join(f"    {k}: {line}" for k, v in bad.items() for line in v[:5])
        raise TranslationError(f"{path.name}: {counts}\n{detail}")
    names = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    return translate_notebook(nb, po, path.name, names)


def build(root: Path, notebooks: list[Path], allow_untranslated: bool, run: bool) -> list[str]:
    errors, built = [], []
    for path in notebooks:
        try:
            built.append((path, build_one(root, path, allow_untranslated)))
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
        target.write_text(dumps_notebook(nb), encoding="utf-8")
        report.append(f"wrote {target.relative_to(root)}")
    if run:
        import run_notebooks  # needs nbclient and a kernel; imported only here

        for path, _ in built:
            seconds = run_notebooks.run(translated_path(root, path))
            report.append(f"{seconds:6.1f} s  ran {LANG_DIR}/{path.name}")
    return report


# --------------------------------------------------------------------------- check

_VOLATILE_METADATA = {"execution", "collapsed", "scrolled", "ExecuteTime"}


def _sources(nb) -> list[tuple]:
    return [
        (
            c["cell_type"],
            c["source"],
            {k: v for k, v in c.get("metadata", {}).items() if k not in _VOLATILE_METADATA},
        )
        for c in nb["cells"]
    ]


def check(root: Path, notebooks: list[Path]) -> list[str]:
    """Every reason the Chinese edition is not what `update` + `build` would give."""
    found = []
    names = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    for path in notebooks:
        cat = catalogue_path(root, path)
        if not cat.exists():
            found.append(f"{path.name}: no catalogue {cat.relative_to(root)} (run `update`)")
            continue
        nb = read_notebook(path)
        po = load_catalogue(cat)
        messages = extract(nb)
        bad = problems(po, messages)
        for line in bad["missing"]:
            found.append(f"{path.name}: English changed after its translation, {line}")
        for kind in ("fuzzy", "untranslated"):
            found += [f"{path.name}: {kind} {line}" for line in bad[kind]]
        current = {(m.msgctxt, m.msgid) for m in messages}
        stale = [e for e in po if not e.obsolete and (e.msgctxt, e.msgid) not in current]
        if stale:
            found.append(
                f"{path.name}: catalogue has {len(stale)} entries the English no longer has "
                "(run `update`)"
            )
        target = translated_path(root, path)
        if not target.exists():
            found.append(f"{path.name}: {target.relative_to(root)} missing (run `build`)")
            continue
        want = _sources(translate_notebook(nb, po, path.name, names))
        have = _sources(read_notebook(target))
        if want != have:
            if len(want) != len(have):
                where = f"{len(have)} cells, expected {len(want)}"
            else:
                first = next(i for i, (a, b) in enumerate(zip(want, have)) if a != b)
                where = f"first difference in cell {first}"
            found.append(f"{LANG_DIR}/{path.name} is not what `build` writes ({where})")
    if {p.name for p in notebooks} == names and (root / "notebooks" / LANG_DIR).is_dir():
        for extra in sorted((root / "notebooks" / LANG_DIR).glob("*.ipynb")):
            if extra.name not in names:
                found.append(f"{LANG_DIR}/{extra.name} has no English notebook (delete it)")
    return found


# --------------------------------------------------------------------------- glossary


@dataclass
class Term:
    english: str
    chinese: str
    note: str

    @property
    def kept(self) -> bool:
        return self.chinese == self.english


def load_glossary(root: Path) -> list[Term]:
    path = root / "i18n" / "glossary.tsv"
    terms = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0].strip() or not cols[1].strip():
            raise TranslationError(f"{path}:{n}: want 'english<TAB>chinese<TAB>note', got {line!r}")
        terms.append(
            Term(cols[0].strip(), cols[1].strip(), cols[2].strip() if len(cols) > 2 else "")
        )
    return terms


_NOT_PROSE = [
    re.compile(r"```.*?```", re.DOTALL),  # fenced code
    re.compile(r"\$\$.*?\$\$", re.DOTALL),  # display maths
    re.compile(r"(?<!\\)\$[^$\n]+\$"),  # inline maths
    re.compile(r"`[^`\n]+`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<[^>]+>"),  # HTML tags and their attributes
    re.compile(r"https?://\S+"),  # bare URLs
]


def prose_of(text: str) -> str:
    for pattern in _NOT_PROSE:
        text = pattern.sub(" ", text)
    return text


def _term_pattern(english: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s-]+", english)]
    if words[-1].endswith("y") and len(words[-1]) > 2:  # query -> queries
        words[-1] = words[-1][:-1] + "(?:y|ie)"
    # ASCII boundaries: in Chinese the neighbours of an English word are letters to \\w.
    edge_before, edge_after = r"(?<![A-Za-z0-9_-])", r"(?![A-Za-z0-9_-])"
    body = r"[\s-]+".join(words)
    return re.compile(edge_before + body + r"(?:e?s)?" + edge_after, re.IGNORECASE)


def glossary_check(root: Path, notebooks: list[Path]) -> list[str]:
    """English glossary terms left in Chinese prose, and English terms whose Chinese is absent.

    A translator comment "glossary-ignore: <english term>" on an entry waives the second check
    for that term (an idiom such as "head start" that does not mean the glossary's sense).
    """
    terms = load_glossary(root)
    kept = sorted((t for t in terms if t.kept), key=lambda t: -len(t.english))
    translated = [t for t in terms if not t.kept]
    found = []
    for path in notebooks:
        cat = catalogue_path(root, path)
        if not cat.exists():
            continue
        for entry in load_catalogue(cat):
            if entry.obsolete or not entry.msgstr or "fuzzy" in entry.flags:
                continue
            text = prose_of(entry.msgstr)
            for t in translated:  # a first-mention gloss "因果掩码（causal mask）" is allowed
                text = re.sub(re.escape(t.chinese) + r"\s*[（(][^（）()]*[)）]", t.chinese, text)
            for t in kept:
                text = _term_pattern(t.english).sub(" ", text)
            cell = entry.occurrences[0][1] if entry.occurrences else "?"
            where = f"{cat.relative_to(root)} cell {cell}"
            source = prose_of(entry.msgid)
            for t in translated:
                hit = _term_pattern(t.english).search(text)
                if hit:
                    found.append(
                        f"{where}: English {hit.group(0)!r} left in Chinese; use {t.chinese}"
                    )
                elif (
                    _term_pattern(t.english).search(source)
                    and t.chinese not in entry.msgstr
                    and f"glossary-ignore: {t.english}" not in entry.tcomment
                ):
                    found.append(
                        f"{where}: English has {t.english!r} but the Chinese lacks {t.chinese}"
                    )
    return found


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (for tests)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("update", "build", "check", "glossary-check"):
        p = sub.add_parser(name)
        p.add_argument("notebooks", nargs="*", help="English notebooks (default: all)")
        if name == "build":
            p.add_argument("--run", action="store_true", help="execute each built notebook")
            p.add_argument(
                "--allow-untranslated",
                action="store_true",
                help="keep English where a translation is missing or fuzzy (for testing only)",
            )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    start = time.perf_counter()
    try:
        notebooks = english_notebooks(root, args.notebooks)
        if args.command == "update":
            lines, failed = update(root, notebooks), False
        elif args.command == "build":
            lines, failed = build(root, notebooks, args.allow_untranslated, args.run), False
        elif args.command == "check":
            lines = check(root, notebooks)
            failed = bool(lines)
        else:
            lines = glossary_check(root, notebooks)
            failed = bool(lines)
    except TranslationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    seconds = time.perf_counter() - start
    verdict = "FAILED" if failed else "ok"
    print(f"{args.command}: {verdict}, {len(notebooks)} notebooks, {seconds:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
