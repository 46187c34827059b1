"""Environments used by the tests; importable by spawned workers (tests/ is on sys.path)."""
import time

from rlvr import Environment, RowSource, Task, register_env
from rlvr.core import BaseReward
from rlvr.verifiers import NumericMatch


class HangOrNumeric(BaseReward):
    """Exact numeric match, except that a completion saying 'hang' never returns."""
    name = "hang_or_numeric"

    def _score(self, task, completion):
        if "hang" in completion.text:
            time.sleep(10_000)
        return NumericMatch()._score(task, completion)


def _tasks(n=8):
    return [Task(f"t{i}", prompt=f"What is {i}+{i}?", answer=str(2 * i)) for i in range(n)]


@register_env("test-hang", replace=True)
def hang_env():
    return Environment("test-hang", RowSource({"train": _tasks()}), [(HangOrNumeric(), 1.0)],
                       gold=lambda t: f"<answer>{t.answer}</answer>")
