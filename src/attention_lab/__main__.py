"""Command line: ``attention-lab demo`` and ``attention-lab bench`` (``python -m attention_lab``).

Each subcommand has its own ``--help``. What they write goes to a folder the repository
ignores (``artifacts/`` for the demo, ``bench-results/`` for the benchmark).
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .i18n import _


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attention-lab",
        description=_(
            "Attention Lab from the command line: train the copy task, or measure "
            "every attention implementation's speed and memory."
        ),
    )
    parser.add_argument("--version", action="version", version=f"attention-lab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "demo",
        help=_("train TinyLM on a toy task and save its attention heatmaps (make demo)"),
        add_help=False,
    )
    sub.add_parser(
        "bench",
        help=_("time and measure every implementation, after checking each one (make bench)"),
        add_help=False,
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # the subcommand parses its own options (and its own --help)
    args, rest = parser.parse_known_args(argv[:1])
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        from .demo import run
    else:
        from .bench import run
    run(argv[1:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
