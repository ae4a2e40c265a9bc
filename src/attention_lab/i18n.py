"""The reader's language: every string the library shows goes through gettext.

    import attention_lab
    attention_lab.set_language("zh_CN")   # figures, checker feedback, the explorer, tables

The language is chosen once per process: by ``set_language`` (the zh-CN notebooks call it
in their first cell), else by ``ATTENTION_LAB_LANG``, else from the locale (``LANGUAGE``,
``LC_ALL``, ``LC_MESSAGES``, ``LANG``): a locale starting with ``zh`` picks Simplified
Chinese, anything else English.

In library code, ``_("...")`` translates a message where it is shown (never at import
time: the language may change after the import) and ``N_("...")`` only marks a module-level
constant for extraction; translate it with ``_(CONSTANT)`` where it is used. The compiled
catalogue ships in ``locale/zh_CN/LC_MESSAGES/attention_lab.mo`` (built by
``make translations`` from ``i18n/zh_CN/library/*.po``).

Chinese figures need a font with Chinese glyphs. One ships in ``fonts/`` (a subset of Noto
Sans CJK SC with exactly the characters the catalogues use, SIL Open Font License), so no
machine and no Colab session downloads one. In Chinese, matplotlib draws Latin text with
DejaVu Sans, as in English, and falls back to that font for each Chinese character.

Errors the library raises (ValueError, TypeError) keep their English first line, which a
reader can search for, and in Chinese add the translation on the next line (``error_text``).
"""

from __future__ import annotations

import gettext as _gettext
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

DOMAIN = "attention_lab"
LANGUAGES = ("en", "zh_CN")
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
FONT_DIR = Path(__file__).resolve().parent / "fonts"
FONT_FILE = FONT_DIR / "AttentionLabSansSC-Regular.otf"
FONT_FILES = (FONT_FILE, FONT_DIR / "AttentionLabSansSC-Bold.otf")  # regular and bold
FONT_FAMILY = "Attention Lab Sans SC"  # the subset's family name (renamed: it is modified)
LATIN_FAMILY = "DejaVu Sans"  # matplotlib's default, so Latin text looks as in English

# A language tag, lower case with "_": en, en_us, c, posix -> English; zh, zh_cn, zh_sg,
# zh_hans (zh_hans_cn) -> Simplified Chinese; anything else is not a language of the course.
_ENGLISH = ("en", "c", "posix")
_CHINESE = ("zh", "zh_cn", "zh_sg")

_translations: _gettext.NullTranslations = _gettext.NullTranslations()
_language = "en"


def _normalise(lang: str) -> str | None:
    key = lang.split(".")[0].split("@")[0].replace("-", "_").lower()
    if key in _CHINESE or key.startswith("zh_hans"):
        return "zh_CN"
    if key in _ENGLISH or key.startswith("en_"):
        return "en"
    return None


def language_from_environment(environ=None) -> str:
    """``zh_CN`` or ``en``, from ATTENTION_LAB_LANG, else the first locale variable set."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("ATTENTION_LAB_LANG")
    if explicit:
        return _normalise(explicit) or "en"
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name)
        if value:
            first = value.split(":")[0]
            return "zh_CN" if first.lower().startswith("zh") else "en"
    return "en"


def set_language(lang: str | None = None) -> None:
    """Show the library's text in ``lang`` ("zh_CN", "zh-CN", "zh" or "en"); None = from
    the environment (see the module docstring). ``get_language()`` says which is in use
    (nothing is returned, so a notebook's setup cell shows no output)."""
    global _translations, _language
    if lang is None:
        chosen = language_from_environment()
    else:
        if not isinstance(lang, str):
            raise TypeError(f"set_language(lang={lang!r}): lang must be a string such as 'zh_CN'")
        chosen = _normalise(lang)
        if chosen is None:
            raise ValueError(
                f"set_language(lang={lang!r}): not a language of this course; "
                f"use one of {', '.join(repr(x) for x in LANGUAGES)}"
            )
    if chosen == "en":
        _translations = _gettext.NullTranslations()
    else:
        _translations = _gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[chosen])
    _language = chosen
    _apply_fonts()


def get_language() -> str:
    """The language the library speaks now: "en" or "zh_CN"."""
    return _language


def gettext(message: str) -> str:
    """``message`` in the current language (the English when it has no translation)."""
    return _translations.gettext(message)


def pgettext(context: str, message: str) -> str:
    """``message`` in the current language, for an English word with two meanings."""
    return _translations.pgettext(context, message)


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it (module-level constants)."""
    return message


_ = gettext


def error_text(message: str) -> str:
    """An error message: the English (searchable), and in Chinese its translation below it."""
    translated = _translations.gettext(message)
    return message if translated == message else f"{message}\n{translated}"


def part(message: str, **fields) -> tuple[str, str]:
    """A piece of a sentence (``message``, marked with ``N_``) filled with ``fields``: in
    English and in the current language, for ``two_lines``."""
    return message.format(**fields), gettext(message).format(**fields)


def two_lines(message: str, parts: dict[str, tuple[str, str]], **fields) -> str:
    """``message`` (an ``error_text`` result) filled with ``fields`` and ``parts`` (each a
    pair from ``part``), each in the language of its line: the English piece in the English
    first line, the translated piece in the translation below it (when there is one)."""
    english, *translated = message.split("\n", 1)
    lines = [english.format(**{k: v[0] for k, v in parts.items()}, **fields)]
    lines += [line.format(**{k: v[1] for k, v in parts.items()}, **fields) for line in translated]
    return "\n".join(lines)


def display_width(text: str) -> int:
    """The columns ``text`` takes in fixed-width output (a notebook's printed text): a Chinese
    character (East Asian wide or fullwidth) takes two, any other character one."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int) -> str:
    """``text`` followed by spaces up to ``width`` columns (``display_width``), so a column
    printed after it lines up in Chinese too, where ``f"{text:{width}s}"`` counts characters."""
    return text + " " * max(0, width - display_width(text))


# ---------------------------------------------------------------- fonts

_font_registered = False


def font_families() -> list[str]:
    """The families matplotlib should try, in order, for the current language."""
    if _language == "en":
        return [LATIN_FAMILY]
    return [LATIN_FAMILY, FONT_FAMILY]


class _FontsWhenMatplotlibLoads(importlib.abc.MetaPathFinder):
    """Sets the fonts the moment matplotlib is first imported, not before: so ``import
    attention_lab`` loads only the core in every locale, and a figure the reader then draws
    with plain pyplot, in Chinese, still gets the Chinese font. It finds matplotlib with the
    other finders, wraps the found loader's ``exec_module`` and leaves ``sys.meta_path`` at once."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib":
            return None
        _uninstall_hook()
        spec = importlib.util.find_spec(name)  # the other finders: this one is gone
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_fonts(module):
            exec_module(module)
            _apply_fonts()

        spec.loader.exec_module = exec_then_fonts
        return spec


_hook = _FontsWhenMatplotlibLoads()


def _uninstall_hook() -> None:
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)


def _apply_fonts() -> None:
    """Point matplotlib at the right fonts. Chinese sets them now if matplotlib is loaded,
    else the moment it is (``_FontsWhenMatplotlibLoads``); English touches matplotlib only to
    undo an earlier switch, so English figures are exactly matplotlib's defaults."""
    global _font_registered, _saved_family

    if _language == "en":
        _uninstall_hook()
        if _saved_family is not None and "matplotlib" in sys.modules:
            sys.modules["matplotlib"].rcParams["font.family"] = _saved_family
            _saved_family = None
        return
    if "matplotlib" not in sys.modules:
        if _hook not in sys.meta_path:
            sys.meta_path.insert(0, _hook)
        return
    import matplotlib
    from matplotlib import font_manager

    if not _font_registered:
        for path in FONT_FILES:
            font_manager.fontManager.addfont(str(path))
        _font_registered = True
    if _saved_family is None:
        _saved_family = list(matplotlib.rcParams["font.family"])
    matplotlib.rcParams["font.family"] = font_families()


_saved_family: list[str] | None = None
set_language(None)
