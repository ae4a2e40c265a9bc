"""Packaging facts a user relies on: one version, a licence file that matches the metadata."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

import attention_lab

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_has_one_source():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "attention_lab.__version__"
    assert importlib.metadata.version("attention-lab") == attention_lab.__version__


def test_the_licence_file_matches_the_declared_licence():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    assert importlib.metadata.metadata("attention-lab")["License-Expression"] == "MIT"
