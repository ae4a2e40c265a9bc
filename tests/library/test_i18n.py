"""The reader's language (attention_lab.i18n): choosing it, the shipped catalogue and font,
and Chinese figures that draw every character and differ from the English ones."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import polib
import pytest

import attention_lab
from attention_lab import i18n

ROOT = Path(__file__).resolve().parents[2]

from tools.catalogues.font import FAMILY, check_font, needed_characters, shipped_characters  # noqa: E402
from tools.catalogues.library import MO_PATH, check_library, mo_bytes  # noqa: E402

# ---------------------------------------------------------------- choosing the language


@pytest.mark.parametrize("spelling", ["zh_CN", "zh-CN", "zh", "zh_CN.UTF-8", "zh-Hans"])
def test_every_spelling_of_simplified_chinese_is_accepted(spelling):
    try:
        assert attention_lab.set_language(spelling) is None  # no output in a setup cell
        assert attention_lab.get_language() == "zh_CN"
    finally:
        attention_lab.set_language("en")
    assert attention_lab.get_language() == "en"


def test_an_unknown_language_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"lang='fr'.*'en', 'zh_CN'"):
        attention_lab.set_language("fr")
    with pytest.raises(TypeError, match="must be a string"):
        attention_lab.set_language(5)
    assert attention_lab.get_language() == "en"  # unchanged by a refused call


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh_CN"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANGUAGE": "zh_CN:en", "LANG": "en_US.UTF-8"}, "zh_CN"),  # LANGUAGE comes first
        ({"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL overrides LANG
        ({"ATTENTION_LAB_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),  # ours wins
        ({"ATTENTION_LAB_LANG": "zh-CN"}, "zh_CN"),
    ],
)
def test_the_language_comes_from_the_environment_when_not_set(environ, expected):
    assert i18n.language_from_environment(environ) == expected


def test_a_fresh_interpreter_with_a_chinese_locale_speaks_chinese(tmp_path):
    code = "import attention_lab; print(attention_lab.get_language())"
    env = {"PATH": "/usr/bin:/bin", "LANG": "zh_CN.UTF-8", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "zh_CN"


@pytest.mark.parametrize("lang", ["zh_CN.UTF-8", "C"])
def test_importing_the_library_loads_no_matplotlib_in_either_locale(tmp_path, lang):
    """Issue 41: the core owns no pictures. In Chinese the font is set the moment matplotlib
    is imported (so a plain pyplot figure still gets it), not at the library's import."""
    code = (
        "import sys, attention_lab\n"
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'IPython') if m in sys.modules))\n"
        "import matplotlib.pyplot as plt\n"
        "print(plt.rcParams['font.family'])\n"
    )
    env = {"PATH": "/usr/bin:/bin", "LANG": lang, "HOME": str(tmp_path), "MPLBACKEND": "Agg"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    loaded, family = out.stdout.strip().splitlines()
    assert loaded == "[]", f"import attention_lab under LANG={lang} loaded {loaded}"
    if lang.startswith("zh"):
        assert family == str([i18n.LATIN_FAMILY, i18n.FONT_FAMILY])
    else:
        assert "Attention Lab" not in family


def _shipped_entry() -> tuple[str, str]:
    """One (msgid, msgstr) of the compiled catalogue, read with polib: any will do."""
    entry = next(e for e in polib.mofile(str(ROOT / MO_PATH)) if e.msgid and not e.msgctxt)
    return entry.msgid, entry.msgstr


def test_gettext_translates_in_chinese_and_passes_english_through(zh):
    msgid, msgstr = _shipped_entry()
    assert i18n.gettext(msgid) == msgstr != msgid
    assert i18n.gettext("a sentence nobody translated") == "a sentence nobody translated"
    attention_lab.set_language("en")
    assert i18n.gettext(msgid) == msgid


def test_an_error_keeps_its_english_line_and_adds_the_chinese(zh):
    msgid, msgstr = _shipped_entry()
    assert i18n.error_text(msgid) == f"{msgid}\n{msgstr}"
    attention_lab.set_language("en")
    assert i18n.error_text(msgid) == msgid


def test_pad_lines_up_a_column_after_chinese_text_where_a_format_width_does_not():
    names = ["最大权重，未缩放", "var(q·k) / d_head", "熵"]
    padded = [i18n.pad(n, 20) + "|" for n in names]
    assert {i18n.display_width(p) for p in padded} == {21}  # the bar in one column
    assert len({i18n.display_width(f"{n:20s}|") for n in names}) == 3  # what pad replaces
    assert i18n.pad("a" * 25, 20) == "a" * 25  # too long: nothing cut
    assert i18n.display_width("注意力 x") == 8


# ---------------------------------------------------------------- what ships


def test_the_compiled_catalogue_is_current_and_complete():
    assert check_library(ROOT) == []
    assert (ROOT / MO_PATH).read_bytes() == mo_bytes(ROOT)


def test_the_font_has_every_character_the_translations_use_and_stays_small():
    assert check_font(ROOT) == []
    have = shipped_characters(ROOT)
    assert needed_characters(ROOT) <= have
    assert "屏" in have and "蔽" in have
    assert shipped_characters(ROOT, "Bold") == have
    size = sum(path.stat().st_size for path in i18n.FONT_FILES)
    assert size < 800_000, f"the two subset fonts grew to {size:,} bytes"
    assert (i18n.FONT_DIR / "OFL.txt").read_text(encoding="utf-8").count("SIL OPEN FONT") >= 1


def test_the_font_is_renamed_so_it_never_shadows_the_full_noto():
    from fontTools.ttLib import TTFont

    font = TTFont(i18n.FONT_FILE)
    assert font["name"].getDebugName(1) == FAMILY == i18n.FONT_FAMILY
    assert "Noto" not in font["name"].getDebugName(4)


def test_the_wheel_carries_the_catalogue_and_the_font(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("attention_lab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "attention_lab/locale/zh_CN/LC_MESSAGES/attention_lab.mo" in names
    assert "attention_lab/fonts/AttentionLabSansSC-Regular.otf" in names
    assert "attention_lab/fonts/AttentionLabSansSC-Bold.otf" in names
    assert "attention_lab/fonts/OFL.txt" in names


# ---------------------------------------------------------------- Chinese figures


def test_chinese_text_draws_without_a_missing_glyph(zh, caplog):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sample = "".join(sorted(needed_characters(ROOT)))
    fig, ax = plt.subplots(figsize=(8, 2))
    for i in range(0, len(sample), 60):
        for weight in ("normal", "bold"):
            ax.text(0, 1 - i / len(sample), sample[i : i + 60], fontsize=6, weight=weight)
    with warnings.catch_warnings(), caplog.at_level("WARNING", "matplotlib.font_manager"):
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        fig.canvas.draw()
    # "findfont: Failed to find font weight bold ..." is a logged warning, not a warning
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("matplotlib")]
    plt.close(fig)


def test_english_figures_use_matplotlibs_default_font_again():
    import matplotlib

    before = list(matplotlib.rcParams["font.family"])
    attention_lab.set_language("zh_CN")
    assert matplotlib.rcParams["font.family"] == [i18n.LATIN_FAMILY, i18n.FONT_FAMILY]
    attention_lab.set_language("en")
    assert list(matplotlib.rcParams["font.family"]) == before


def _pngs(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        (i, out["data"]["image/png"])
        for i, cell in enumerate(nb["cells"])
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]


ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh-CN").glob("*.ipynb"))


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_chinese_notebook_output_warns_of_a_missing_glyph(path):
    text = path.read_text(encoding="utf-8")
    assert "missing from font" not in text and "Glyph" not in text


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chinese_figure_differs_from_the_english_one(path):
    english = dict(_pngs(ROOT / "notebooks" / path.name))
    chinese = _pngs(path)
    assert len(chinese) == len(english), "the two editions draw different numbers of figures"
    same = [cell for cell, png in chinese if english.get(cell) == png]
    assert not same, f"cells {same} draw the English figure in the Chinese edition"


def test_the_glossary_check_reads_the_librarys_catalogues_too(tmp_path):
    import shutil

    from tools.catalogues.glossary import glossary_check

    assert [f for f in glossary_check(ROOT, []) if "/library/" in f] == []
    copy = tmp_path / "repo"
    (copy / "i18n" / "zh_CN" / "library").mkdir(parents=True)
    shutil.copy(ROOT / "i18n" / "glossary.tsv", copy / "i18n" / "glossary.tsv")
    planted = polib.POFile(wrapwidth=0)
    planted.append(
        polib.POEntry(
            msgid="the causal mask blocks the future",
            msgstr="causal mask 屏蔽未来",  # English term left in the Chinese
            occurrences=[("src/attention_lab/masks.py", "1")],
        )
    )
    planted.save(str(copy / "i18n" / "zh_CN" / "library" / "figures.po"))
    found = glossary_check(copy, [])
    assert any("masks.py:1" in f and "因果掩码" in f for f in found), found
