"""Command line: ``python -m attention_lab demo`` and ``python -m attention_lab bench``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv else "demo"
    if command == "demo":
        from .demo import run
    elif command == "bench":
        from .bench import run
    else:
        raise SystemExit(f"unknown command {command!r}; use 'demo' or 'bench'")
    run(argv)


if __name__ == "__main__":
    main()
