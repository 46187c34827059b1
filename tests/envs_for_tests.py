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


class AnyText(BaseReward):
    """1.0 for any completion with a letter in it: every sample of a tiny random model is
    'verified', so pipelines that keep only verified samples have rows to work with."""
    name = "any_text"

    def _score(self, task, completion):
        from rlvr.core import Verdict
        right = any(c.isalpha() for c in completion.text)
        return Verdict(score=float(right), reason="" if right else "no letter")


@register_env("test-any-text", replace=True)
def any_text_env():
    tasks = [Task(f"a{i}", prompt=f"Say a word {i}.", answer="") for i in range(16)]
    return Environment("test-any-text", RowSource({"train": tasks, "test": tasks}),
                       [(AnyText(), 1.0)], gold=lambda t: "word", junk=["42", "..."],
                       teacher=lambda t: f"word {t.id}")
