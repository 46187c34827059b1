"""Answers held by a JSON object's `answer` / `final_answer` field (one of the answer
statements `extract` reads)."""
from __future__ import annotations

import json
import re

__all__ = ["json_answers"]

# an answer in a JSON object: `{"answer": 17}`, `{"final_answer": "\\frac{1}{2}"}`
_JSON_KEY = re.compile(r'"(?:final[_ ]?answer|answer)"\s*:\s*', re.I)
_JSON = json.JSONDecoder()


def json_answers(text: str) -> list[tuple[int, int, str]]:
    """Answers held by a JSON object's `answer` / `final_answer` field, as the JSON says them
    (strings unescaped, lists joined); a value that is not JSON counts as no answer here."""
    out = []
    for m in _JSON_KEY.finditer(text):
        try:
            value, end = _JSON.raw_decode(text[m.end():m.end() + 2000])
        except ValueError:
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) \
                and str(value).strip():
            out.append((m.start(), m.end() + end, str(value).strip()))
    return out
