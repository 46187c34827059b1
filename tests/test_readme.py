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
