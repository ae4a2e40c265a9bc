"""The Simplified Chinese edition: gettext catalogues in, notebooks/zh-CN/ out.

    python -m tools.translations update            # English -> i18n/zh_CN/<stem>.po (merge, fuzzy)
    python -m tools.translations build [--run]     # catalogues -> notebooks/zh-CN/<name>.ipynb
    python -m tools.translations check             # exit 1 on untranslated/fuzzy/stale/out-of-date
    python -m tools.translations glossary-check    # exit 1 on an English glossary term in Chinese
    python -m tools.translations english-words     # English words zh-CN still prints, per notebook

With no notebook paths, `update`, `build` and `check` also do the library's own text
(gettext domain attention_lab, i18n/zh_CN/library/*.po -> src/attention_lab/locale/, see
tools/catalogues/library.py), the subset font the Chinese figures draw with
(tools/catalogues/font.py) and
README.zh-CN.md (i18n/zh_CN/teaching/README.po, one entry per Markdown block:
tools/catalogues/readme.py).

Every subcommand takes notebook paths (default: every notebooks/*.ipynb) and `--root DIR`
(default: this repository), so tests can work on a copy in a temporary directory.

One catalogue per notebook, read and written with polib, so any PO editor (Poedit, Weblate,
Crowdin) can be used. Entries are keyed by the English text:

- msgctxt "markdown": one entry per markdown cell, msgid = the cell's whole source
  (the Colab badge cell is generated, not translated);
- msgctxt "code-comment": one entry per prose comment in a code cell, msgid = the comment text
  after "# ". A leading shape such as "(B, T, D)" stays outside the entry; comments that are only
  shapes, code or a single word (a token label such as "# cat") are not extracted;
- msgctxt "code-string": one entry per user-visible string literal of a code cell (two or more
  English words; or a print() argument, a title=/titles=/suptitle=/label=/xlabel=/ylabel=/
  legend=/names=/description= value, a docstring), msgid = the literal's source text with its
  prefix and quotes, e.g. f"loss {loss:.3f} after {n} steps". The translation is a literal too,
  f"{n} 步后损失 {loss:.3f}": of the same kind (f-string or not) with the same placeholders.
  Strings the code uses in logic (keys, comparisons, search strings, behaviour keywords such as
  loc= or task=, text fed to a model) and strings that look like code are never extracted
  (tools/catalogues/literals.py, code_strings). Other code is never translated.

`update` merges as msgmerge does: an English text that changed finds its closest old entry
(difflib ratio >= FUZZY_RATIO), whose translation is carried over and flagged fuzzy with the old
English kept as "#| msgid"; entries no longer used are kept as obsolete ("#~") when translated.
In occurrences, the number after the notebook name is the cell index, not a line.

`build` writes the English notebook with every markdown cell, code comment and code string
replaced by its translation (other code, outputs and metadata unchanged; the badge points at
notebooks/zh-CN/; relative links to files outside notebooks/ get one more "../"; the Colab
setup cell ends with `attention_lab.set_language("zh_CN")`, so the library speaks Chinese too).
It refuses when an entry is untranslated or fuzzy unless --allow-untranslated (which leaves
the English, for testing), and when a code string's translation is not a literal of the same
kind with the same placeholders (the error names the notebook, the cell and the entry).

`english-words` reports, per Chinese notebook, the English words its stdout outputs still
print (tools/catalogues/english_words.py; names such as True, SDPA, MiB are allowed).

Between an English change and its translation, `build --allow-pending` and
`check --allow-pending` accept entries that `update` has marked for retranslation (fuzzy or
untranslated): those keep the English, and the Chinese notebook's title cell says how many
places wait for a translation (PENDING_NOTICE), so a stale translation is never silent.
English that `update` has not merged yet still fails, and `check --allow-pending` lists the
pending count per notebook.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent

# The parts, by role, live in tools/catalogues/; their names stay importable from here, e.g.
# `from translations import read_notebook, dumps_notebook`.
if not __package__:  # run as a file, not as the module tools.translations
    raise SystemExit("run it from the repository root as a module: python -m tools.translations")
from tools.catalogues.build import build, build_one, fix_links, problems, translate_notebook  # noqa: E402
from tools.catalogues.check import check, pending  # noqa: E402
from tools.catalogues.common import (  # noqa: E402
    COMMENT,
    FUZZY_RATIO,
    HEADER,
    LANG_DIR,
    LOCALE,
    MARKDOWN,
    ROOT,
    TranslationError,
    catalogue_path,
    english_notebooks,
    load_catalogue,
    new_catalogue,
    read_notebook,
    translated_path,
)
from tools.catalogues.english_words import report as english_words_report  # noqa: E402
from tools.catalogues.extract import (  # noqa: E402
    Comment,
    Message,
    code_comments,
    extract,
    is_generated,
    replace_comments,
    split_comment,
)
from tools.catalogues.font import build_font, check_font  # noqa: E402
from tools.catalogues.glossary import Term, glossary_check, load_glossary, prose_of  # noqa: E402
from tools.catalogues.library import PARTS, check_library, compile_library, update_library  # noqa: E402
from tools.catalogues.merge import merge, update  # noqa: E402
from tools.catalogues.readme import build_readme, check_readme, update_readme  # noqa: E402
from tools.notebook_io import dumps_notebook  # noqa: E402

__all__ = [
    "COMMENT", "FUZZY_RATIO", "HEADER", "LANG_DIR", "LOCALE", "MARKDOWN", "ROOT",
    "Comment", "Message", "Term", "TranslationError",
    "build", "build_one", "catalogue_path", "check", "code_comments", "dumps_notebook",
    "english_notebooks", "extract", "fix_links", "glossary_check", "is_generated",
    "load_catalogue", "load_glossary", "main", "merge", "new_catalogue", "problems",
    "prose_of", "read_notebook", "replace_comments", "split_comment", "translate_notebook",
    "translated_path", "update",
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (for tests)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("update", "build", "check", "glossary-check", "english-words"):
        p = sub.add_parser(name)
        p.add_argument("notebooks", nargs="*", help="English notebooks (default: all)")
        if name == "build":
            p.add_argument("--run", action="store_true", help="execute each built notebook")
            p.add_argument(
                "--allow-untranslated",
                action="store_true",
                help="keep English where a translation is missing or fuzzy (for testing only)",
            )
        if name in ("build", "check"):
            p.add_argument(
                "--allow-pending",
                action="store_true",
                help="entries marked for retranslation (fuzzy, untranslated) keep the English "
                "and the notebook's title says so; anything else still fails",
            )
    lib = sub.add_parser("library", help="update and compile only the library's catalogues")
    lib.add_argument(
        "--part",
        action="append",
        help="only this part (repeatable): " + ", ".join(part for part, _ in PARTS),
    )
    lib.add_argument("notebooks", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    start = time.perf_counter()
    try:
        notebooks = english_notebooks(root, args.notebooks)
        whole = not args.notebooks  # the library's catalogues and the font go with "all"
        if args.command == "library":
            lines, failed = update_library(root, args.part) + compile_library(root), False
        elif args.command == "update":
            lines, failed = update(root, notebooks), False
            lines += update_library(root) + update_readme(root) if whole else []
        elif args.command == "build":
            lines = compile_library(root) + build_font(root) if whole else []
            lines += build_readme(root, args.allow_pending) if whole else []
            lines += build(root, notebooks, args.allow_untranslated, args.run, args.allow_pending)
            failed = False
        elif args.command == "check":
            lines = check(root, notebooks, args.allow_pending)
            if whole:
                lines += check_library(root, args.allow_pending) + check_font(root)
                lines += check_readme(root, args.allow_pending)
            failed = bool(lines)
            if args.allow_pending:
                waiting = pending(root, notebooks)
                lines += [
                    f"{name}: {n} entries marked for retranslation" for name, n in waiting.items()
                ]
        elif args.command == "english-words":  # a report: how much English zh-CN still prints
            lines, failed = english_words_report(root, notebooks), False
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
