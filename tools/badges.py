"""Write every notebook's Colab badge and Colab install cell from one place.

The repository's public address lives only in pyproject.toml ([project.urls] Repository).
Change it there, run `make badges`, commit. tests/course/test_notebook_frame.py fails while any
notebook still carries an old badge or install line.

A notebook marks the two cells with the tags "colab-badge" (markdown) and "colab-setup" (code).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if not __package__:  # run as a file, not as the module tools.badges
    raise SystemExit("run it from the repository root as a module: python -m tools.badges")
from tools.notebook_io import read_notebook, write_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def repository_url() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if match is None:
        raise SystemExit('pyproject.toml has no [project.urls] Repository = "..." line')
    return match.group(1).rstrip("/")


def badge_source(notebook_name: str, url: str | None = None) -> str:
    url = url or repository_url()
    path = url.removeprefix("https://github.com/")
    link = f"https://colab.research.google.com/github/{path}/blob/main/notebooks/{notebook_name}"
    image = "https://colab.research.google.com/assets/colab-badge.svg"
    return f"[![Open In Colab]({image})]({link})"


def setup_source(url: str | None = None) -> str:
    """The Colab setup cell: install the library without touching Colab's torch and
    ipywidgets, then say in one line what is installed. Silent anywhere else (a local run
    prints nothing, so the notebooks' stored outputs do not depend on the machine)."""
    url = url or repository_url()
    return (
        "# On Colab, install the attention_lab library first (Colab's own torch and ipywidgets\n"
        "# are kept). Locally, `make lab` has installed it already and this cell does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "attention-lab @ git+{url}"\n'
        "    from importlib.metadata import version\n"
        "\n"
        '    versions = (f"{p} {version(p)}" for p in ("attention-lab", "torch", "ipywidgets"))\n'
        '    print("installed:", ", ".join(versions))'
    )


def expected(cell, notebook_name: str) -> str | None:
    tags = cell.get("metadata", {}).get("tags", [])
    if "colab-badge" in tags:
        return badge_source(notebook_name)
    if "colab-setup" in tags:
        return setup_source()
    return None


def main(argv: list[str]) -> None:
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        nb = read_notebook(path)
        changed = False
        for cell in nb["cells"]:
            want = expected(cell, path.name)
            if want is not None and cell["source"] != want:
                cell["source"], changed = want, True
        if changed:
            write_notebook(nb, path)
            print(f"updated {path.name}")


if __name__ == "__main__":
    main(sys.argv[1:])
