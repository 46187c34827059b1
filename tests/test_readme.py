"""The README's registration example runs as written, and its quick start commands exist."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_registration_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"readme-example: begin.*?```python\n(.*?)```.*?readme-example: end", text,
                      re.DOTALL)
    assert block, "README lost its executed example"
    code = block.group(1)
    non_blank = [line for line in code.splitlines() if line.strip()]
    assert len(non_blank) < 30                        # "a task in under 30 lines"
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip() == "1.0 {'capital': 1.0, 'think_format': 1.0}"


def test_quick_start_commands_point_at_real_scripts():
    text = README.read_text()
    commands = re.findall(r"^bash (scripts/\S+)", text, re.MULTILINE)
    assert commands[:2] == ["scripts/r1zero.sh", "scripts/test.sh"]
    for script in commands:
        assert (README.parent / script).is_file()
    ci = (README.parent / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci


def test_readme_quick_start_is_the_commands_what_the_job_shows_and_its_table():
    # the two commands, one paragraph on the main job, its table: no timing diary (that is in
    # benchmarks/README.md), the model named as what it is, and no stale defaults
    text = README.read_text()
    section = text[text.index("## Quick start"):]
    section = section[:section.index("\n## ", 3)]
    assert len(section.splitlines()) <= 45
    assert "Q4_1 GGUF" in section and "SmolLM2-135M-Instruct" in section
    assert "pass@1 (greedy)" in section and "benchmarks/README.md" in section
    assert not re.search(r"\d+ min \d+ s,", section)          # no list of run times
    assert "default 10 s" not in text                          # the deadline is derived


def test_readme_says_where_evaluation_and_auditing_are():
    text = README.read_text()
    for name in ("rlvr eval", "rlvr plot passk", "--endpoint", "reasoning-gym",
                 "docs/evaluation.md", "rlvr audit", "docs/audit.md", "--import"):
        assert name in text, name
    exits = re.findall(r"\*\*Exit codes\*\*", text)
    assert len(exits) == 1                                     # stated once
