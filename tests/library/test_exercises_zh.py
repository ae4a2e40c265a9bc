"""The exercise checkers speak Simplified Chinese after ``set_language("zh_CN")``: verdicts,
hints, the not-attempted hint and ``summary()``; in English they print exactly what they
printed before the translation; and i18n/zh_CN/library/exercises.po translates every message
the checkers can produce."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest

from attention_lab import exercises as ex
from attention_lab.exercises import modules
from tests.library import test_checker_mistakes as mistakes  # the skeletons' typical wrong answers
from tests.library import test_exercises as cases  # the reference solutions and typical mistakes
from tests.library.test_lesson_skeletons import make  # a single head with a chosen mistake
from tools.catalogues.library import (
    check_library,  # tools/catalogues/library.py (pytest's pythonpath)
)

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "i18n" / "zh_CN" / "library" / "exercises.po"

# English words of the checkers' own sentences: none may reach a Chinese reader (code in a
# message, e.g. `window`, `scaled`, `w[a:b]` or `torch.triu(...)`, uses none of them)
ENGLISH = {
    "an", "and", "are", "at", "be", "but", "by", "did", "differs", "each", "every",
    "exercise", "exercises", "expected", "for", "from", "got", "has", "have", "hint", "is",
    "it", "its", "lesson", "must", "no", "not", "of", "on", "only", "or", "pass", "passed",
    "replace", "returned", "should", "still", "that", "the", "their", "to", "up", "use",
    "was", "were", "with", "yet", "you", "your",
}  # fmt: skip


def english_words(text: str) -> set[str]:
    """The English sentence words in ``text`` (code identifiers are not in ENGLISH)."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)  # head_rows_from_fused is one name
    return {word for word in words if word.lower() in ENGLISH}


def printed(capsys, check, answer) -> str:
    check(answer, record=False)
    return capsys.readouterr().out


# --- Chinese --------------------------------------------------------------------------------


def test_a_passing_checker_prints_its_verdict_in_chinese(zh, capsys):
    out = printed(capsys, ex.check_sliding_mask, cases.sliding_mask)
    assert out == (
        "✅ 通过：在 5 种尺寸下都与 attention_lab.sliding_window_mask 相同，"
        "包括 window >= T 的情况\n"
    )
    assert not english_words(out)


def test_a_failing_checker_gives_its_message_and_hint_in_chinese(zh, capsys):
    out = printed(capsys, ex.check_sliding_mask, cases.sliding_inverted)
    message, hint = out.splitlines()
    assert message == (
        "❌ 还没通过：当 T=12、window=8 时，你的掩码正好反了："
        "它屏蔽了 token 可以看的位置，却放过了未来"
    )
    assert hint.startswith("   提示：True 表示屏蔽：未来（torch.triu(..., diagonal=1)）")
    assert not english_words(out), out
    verdict = ex.check_sliding_mask(cases.sliding_inverted, record=False)
    assert verdict.status == ex.Verdict("not yet", "").status  # the status key stays English


def test_a_not_implemented_exercise_gets_the_chinese_hint(zh, capsys):
    out = printed(capsys, ex.check_sliding_mask, cases._stub)
    assert out == "⏳ 尚未尝试：`_stub` 仍然抛出 NotImplementedError；把它换成你的代码\n"
    verdict = ex.check_sliding_mask(cases._stub, record=False)
    assert verdict.status == "not attempted yet"


def test_a_crash_in_the_learners_code_is_reported_in_chinese(zh, capsys):
    def crashes(*args):
        raise RuntimeError("shape '[2, 3]' is invalid")

    out = printed(capsys, ex.check_sliding_mask, crashes)
    assert out.startswith("❌ 还没通过：`crashes` 抛出了 RuntimeError：shape '[2, 3]' is invalid\n")
    assert "\n   提示：返回 torch.triu(...) | torch.tril(...)，一个 (T, T) 的 bool 张量" in out


def test_summary_is_chinese(zh, capsys):
    ex.reset()
    try:
        ex.check_sliding_mask(cases.sliding_mask)
        ex.check_looks_ahead(cases.looks_ahead_last_token_only)
        capsys.readouterr()
        table = ex.summary("04")
        assert capsys.readouterr().out == (
            "第 04 课：2 个练习中通过了 1 个\n"
            "  ❌ looks_ahead   还没通过\n"
            "  ✅ sliding_mask  通过\n"
        )
        assert table.rows == [("04", "looks_ahead", "not yet"), ("04", "sliding_mask", "passed")]
        ex.reset("04")
        assert str(ex.summary("04", show=False)).splitlines()[1:] == [
            "  ⏳ looks_ahead   尚未尝试",
            "  ⏳ sliding_mask  尚未尝试",
        ]
        assert str(ex.summary("13", show=False)) == (
            "没有 '13' 这一课：请从 01, 02, 03, 04, 05, 06, 07, 08, 09, 10, 11, 12 中选一个"
        )
        for line in str(ex.summary(show=False)).splitlines():
            assert not english_words(line), line
    finally:
        ex.reset()


@pytest.mark.parametrize("checker, solution, mistakes", cases.CASES, ids=cases.IDS)
def test_no_english_sentence_reaches_a_chinese_reader(zh, capsys, checker, solution, mistakes):
    """Every verdict the tests know of, for every checker: pass, each mistake, the stub, and
    answers of the wrong kind."""
    answers = [solution, cases._stub, lambda *a, **k: None, lambda *a, **k: (1, 2), 42]
    for answer in answers + [mistake for mistake, _words in mistakes]:
        out = printed(capsys, checker, answer)
        assert out[:2] in ("✅ ", "❌ ", "⏳ "), out
        assert not english_words(out), out


def test_the_lessons_own_skeleton_checkers_speak_chinese(zh, capsys):
    for check, mistake in (
        (modules.check_single_head_class, "unscaled"),
        (modules.check_single_head_class, "columns"),
        (modules.check_single_head_class, "tuple"),
        (modules.check_causal_attention_class, "no mask"),
        (modules.check_causal_attention_class, "zero after"),
    ):
        out = printed(capsys, check, make(mistake))
        assert out.startswith("❌ 还没通过："), out
        assert "\n   提示：" in out
        assert not english_words(out), out
    out = printed(capsys, modules.check_single_head_class, cases.sliding_mask)  # not a class
    assert out.startswith("❌ 还没通过：需要一个继承自 nn.Module 的类，收到的却是 function\n")


def test_the_named_mistakes_of_the_bank_speak_chinese(zh, capsys):
    """tests/library/test_checker_mistakes.py's wrong answers: each verdict is Chinese throughout,
    and
    the one the lesson 05 check could not fail before names the missing dropout."""
    for check, answer, _words in mistakes.BANK:
        out = printed(capsys, check, answer)
        assert out.startswith("❌ 还没通过："), out
        assert not english_words(out), out
    out = printed(capsys, modules.check_causal_attention_class, mistakes.NeverCallsDropout)
    assert out.startswith(
        "❌ 还没通过：你的 CausalAttention 在训练模式下（dropout=0.25）：从未应用 dropout"
    ), out


# --- English, unchanged ---------------------------------------------------------------------


def test_in_english_the_same_calls_print_what_they_always_printed(capsys):
    assert printed(capsys, ex.check_sliding_mask, cases.sliding_mask) == (
        "✅ passed: equal to attention_lab.sliding_window_mask for 5 sizes, window >= T included\n"
    )
    assert printed(capsys, ex.check_sliding_mask, cases.sliding_inverted) == (
        "❌ not yet: with T=12, window=8, your mask is the exact opposite: it blocks the "
        "positions a token may see and lets the future through\n"
        "   hint: True means blocked: the future (torch.triu(..., diagonal=1)) and everything "
        "`window` or more steps back (torch.tril(..., diagonal=-window))\n"
    )
    assert printed(capsys, ex.check_sliding_mask, cases._stub) == (
        "⏳ not attempted yet: `_stub` still raises NotImplementedError; "
        "replace it with your code\n"
    )
    ex.reset()
    try:
        ex.check_sliding_mask(cases.sliding_mask)
        ex.check_looks_ahead(cases.looks_ahead_last_token_only)
        capsys.readouterr()
        ex.summary("04")
        assert capsys.readouterr().out == (
            "lesson 04: 1 of 2 exercises pass\n"
            "  ❌ looks_ahead   not yet\n"
            "  ✅ sliding_mask  passed\n"
        )
        assert str(ex.summary("13", show=False)) == (
            "no lesson '13': use one of 01, 02, 03, 04, 05, 06, 07, 08, 09, 10, 11, 12"
        )
    finally:
        ex.reset()


def test_switching_back_to_english_restores_the_english_text(zh, capsys):
    assert printed(capsys, ex.check_sliding_mask, cases._stub).startswith("⏳ 尚未尝试：")
    from attention_lab import set_language

    set_language("en")
    assert printed(capsys, ex.check_sliding_mask, cases._stub).startswith(
        "⏳ not attempted yet: `_stub` still raises"
    )


# --- the catalogue --------------------------------------------------------------------------


def test_every_message_of_the_checkers_is_translated():
    po = polib.pofile(str(CATALOGUE), wrapwidth=0)
    active = [entry for entry in po if not entry.obsolete]
    assert len(active) > 300
    assert [e.msgid for e in active if not e.msgstr] == []
    assert [e.msgid for e in active if "fuzzy" in e.flags] == []
    # extracted from the source as `tools/translations.py library` does: nothing missing,
    # stale, untranslated or with other placeholders than the English
    assert [line for line in check_library(ROOT) if "exercises.po" in line] == []
