"""Times in the README and docs come with the conditions they were measured under (a run time
means nothing without the machine and its load), and docs speak to users, not to the tracker."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

DURATION = re.compile(r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:s|seconds|min|minutes|h|hours)\b(?!/)")
"""A duration: '30 s', '7 min', '2.5-3 h' (not a rate such as '2 s/step')."""
CLAIM = re.compile(r"\b(?:took|takes|taking|ran in|run time|runs? in|finished in|per step|"
                   r"in about|about \d|once, ~)", re.I)
"""Words that make a duration a claim about how long something runs (not a limit or a setting)."""
MACHINE = re.compile(r"\d+-core|\bCPU\b|\bGPU\b|\bH\d{3}\b|\bmachine\b", re.I)
LOAD = re.compile(r"\bload(?: average)? (?:of )?(?:about |~)?[\d.]|\bidle\b|"
                  r"nothing else (?:was )?running|under load", re.I)


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs: code blocks, indented blocks and table rows left out."""
    out, buf, fence = [], [], False
    for line in text.splitlines() + [""]:
        if line.strip().startswith("```"):
            fence = not fence
            line = ""
        elif fence or line.startswith("    ") or line.startswith("|"):
            continue
        if line.strip():
            buf.append(line)
        elif buf:
            out.append(" ".join(buf))
            buf = []
    return out


def timing_claims_without_conditions(text: str) -> list[str]:
    return [p for p in paragraphs(text) if DURATION.search(p) and CLAIM.search(p)
            and not (MACHINE.search(p) and LOAD.search(p))]


def test_the_checker_finds_a_bare_time_and_accepts_one_with_its_conditions():
    assert timing_claims_without_conditions("It takes about 7 minutes and 3.7 GiB.")
    assert timing_claims_without_conditions("It takes about 7 minutes on a 2-core machine.")
    assert not timing_claims_without_conditions(
        "It took 7 min on an idle 2-core machine and 23 min at load average ~4.5.")
    assert not timing_claims_without_conditions("A 10 s limit per program.")   # not a run time
    assert not timing_claims_without_conditions("```\nit takes 7 min\n```")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_time_in_the_docs_states_the_machine_and_its_load(doc):
    bare = timing_claims_without_conditions(doc.read_text())
    assert not bare, f"{doc.name}: a time without the machine and load it was measured on: " \
                     f"{bare[0][:200]!r}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_do_not_talk_about_the_tracker(doc):
    hits = re.findall(r"[^.]*\b(?:the issue|issue \d+)\b[^.]*", doc.read_text(), re.I)
    assert not hits, f"{doc.name}: {hits[0].strip()!r}"


def test_the_main_jobs_bar_estimates_the_time_left_with_the_closing_evaluation():
    from rlvr.trainer.recipes.r1zero import time_left
    assert time_left(5, [], None) == "left: ?"
    assert time_left(3, [40.0, 50.0], 26.0) == "~2:41 left"          # 3 x 45 + 26 s
    assert time_left(80, [50.0], 30.0) == "~1:07:10 left"
    assert time_left(2, [45.0], None) == "~1:30 left + final eval"    # resumed: eval unknown


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_a_resume_claim_says_how_exactly_it_matches(doc):
    """'the same metrics' after a resume holds to the last digit on the tiny test model, to 6-7
    significant digits on a real one: a claim must say which."""
    sentences = [s for p in paragraphs(doc.read_text()) for s in re.split(r"(?<=[.;])\s+", p)]
    bare = [s for s in sentences if re.search(r"resum", s, re.I) and "digit" not in s
            and re.search(r"same metrics|metric for metric", s)]
    assert not bare, f"{doc.name}: {bare[0][:200]!r}"
