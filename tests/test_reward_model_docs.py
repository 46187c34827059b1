"""The "Use a learned reward model" example runs as written (docs; README once it has it)."""
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ["True", "['numeric_match', 'reward_model', 'think_format'] True"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py


def _example(path: Path) -> str | None:
    block = re.search(r"rm-example: begin.*?```python\n(.*?)```.*?rm-example: end",
                      path.read_text(), re.DOTALL)
    return block.group(1) if block else None


def _run(code: str, name: str, capsys) -> list[str]:
    exec(compile(code, name, "exec"), {"__name__": "rm_example"})
    return capsys.readouterr().out.strip().splitlines()


def test_docs_reward_model_example_runs(capsys):
    code = _example(ROOT / "docs" / "reward_models.md")
    assert code, "docs/reward_models.md lost its executed example"
    assert _run(code, "docs/reward_models.md", capsys)[-2:] == EXPECTED


def test_readme_reward_model_section_runs(capsys):
    readme = ROOT / "README.md"
    code = _example(readme)
    assert code, "README's 'Use a learned reward model' section needs rm-example markers"
    assert _run(code, "README.md", capsys)[-2:] == EXPECTED
