"""The feedback page of one graded notebook, for ``hub/grading/grade.py``: the score of each
test cell and the checker's verdict, nothing else.

nbgrader's ``generate_feedback`` renders every output of the notebook, a student's raw HTML
and ``<script>`` included, and everything printed while grading. This page holds only:

* the scores, from the gradebook;
* each test cell's verdict, as ``attention_lab.exercises._record.graded_check`` hands it over
  (a display output of type ``application/vnd.attention-lab.verdict+json``: status, message,
  hint, the line the checker printed); where a test cell has no verdict, the name of the
  error that stopped it.

Jinja2 escapes every value (autoescape), and the page forbids scripts and every other source
(Content-Security-Policy ``default-src 'none'``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jinja2 import Environment

VERDICT_MIME = "application/vnd.attention-lab.verdict+json"
STATUSES = ("passed", "not yet", "not attempted yet")
ERROR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,80}$")
MAX_TEXT = 4000  # characters of a verdict shown, at most

LABELS = {
    "en": {
        "title": "Feedback",
        "score": "Score",
        "exercise": "Test cell",
        "points": "Points",
        "verdict": "The checker's verdict",
        "no_verdict": "no verdict: the check stopped with {error}",
        "not_run": "no verdict: the cell did not run",
        "note": "Only the checkers' verdicts and the scores are shown here; what the notebook "
        "printed while it was graded is not.",
    },
    "zh_CN": {
        "title": "评分反馈",
        "score": "得分",
        "exercise": "测试单元格",
        "points": "分数",
        "verdict": "检查器的结论",
        "no_verdict": "没有结论：检查因 {error} 而中止",
        "not_run": "没有结论：这个单元格没有运行",
        "note": "这里只列出检查器的结论和分数；评分时笔记本打印的内容不在其中。",
    },
}

PAGE = """\
<!DOCTYPE html>
<html lang="{{ 'zh-CN' if language == 'zh_CN' else 'en' }}">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{{ t.title }}: {{ assignment }}, {{ student }}</title>
<style>
body { font-family: sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ccc; padding: .4rem; text-align: left; vertical-align: top; }
pre { white-space: pre-wrap; margin: 0; font-family: inherit; }
.passed { color: #11662b; } .failed { color: #9b1c1c; }
</style>
</head>
<body>
<h1>{{ t.title }}: {{ assignment }}</h1>
<p>{{ student }} · {{ notebook }} · {{ t.score }}:
<b id="total">{{ score }} / {{ max_score }}</b></p>
<table>
<tr><th>{{ t.exercise }}</th><th>{{ t.points }}</th><th>{{ t.verdict }}</th></tr>
{% for row in rows %}<tr id="{{ row.grade_id }}" class="{{ row.css }}">
<td>{{ row.grade_id }}</td><td>{{ row.score }} / {{ row.max_score }}</td>
<td><pre>{{ row.text }}</pre></td></tr>
{% endfor %}</table>
<p>{{ t.note }}</p>
</body>
</html>
"""


@dataclass
class Row:
    grade_id: str
    score: str
    max_score: str
    text: str
    css: str


def _points(value) -> str:
    return f"{float(value or 0):g}"


def verdict_of(cell) -> dict | None:
    """The last verdict a test cell handed over, checked for shape, else None."""
    found = None
    for out in cell.get("outputs", []):
        if out.get("output_type") not in ("display_data", "execute_result"):
            continue
        data = out.get("data", {}).get(VERDICT_MIME)
        if isinstance(data, dict) and data.get("status") in STATUSES:
            found = data
    return found


def _text(value) -> str:
    return str(value)[:MAX_TEXT] if isinstance(value, str) else ""


def row_text(cell, labels: dict) -> tuple[str, str]:
    """What the page says of one test cell, and its CSS class."""
    verdict = verdict_of(cell)
    if verdict is not None:
        text = _text(verdict.get("text")) or _text(verdict.get("message"))
        return text, "passed" if verdict["status"] == "passed" else "failed"
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        name = errors[-1].get("ename", "")
        return labels["no_verdict"].format(
            error=name if ERROR_NAME.match(str(name)) else "an error"
        ), "failed"
    return labels["not_run"], "failed"


def language_of(nb) -> str:
    """The language the checkers spoke in this notebook (the verdicts say), else English."""
    for cell in nb.cells:
        verdict = verdict_of(cell) if cell.cell_type == "code" else None
        if verdict is not None and verdict.get("language") in LABELS:
            return verdict["language"]
    return "en"


def page(nb, scores: dict[str, tuple[float, float]], student: str, assignment: str, notebook: str):
    """The HTML page for the autograded notebook ``nb``; ``scores``: grade_id -> (score,
    max_score) of each autograded test cell, from the gradebook."""
    language = language_of(nb)
    labels = LABELS[language]
    rows = []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id not in scores:
            continue
        score, max_score = scores[grade_id]
        text, css = row_text(cell, labels)
        rows.append(Row(grade_id, _points(score), _points(max_score), text, css))
    env = Environment(autoescape=True)
    return env.from_string(PAGE).render(
        t=labels,
        language=language,
        student=student,
        assignment=assignment,
        notebook=notebook,
        rows=rows,
        score=_points(sum(s for s, _ in scores.values())),
        max_score=_points(sum(m for _, m in scores.values())),
    )
