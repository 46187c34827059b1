"""Built-in multi-turn environments: `tool-arithmetic`, `math-python`, `code-feedback`.

- `tool-arithmetic`: products and sums of numbers too large to work out in one's head, with a
  `calculator` tool. A small model learns it on a CPU: the reward rises with the rate at which
  it calls the tool and copies the result (docs/multiturn.md).
- `math-python`: tool-integrated reasoning on math problems with a sandboxed, stateless `python`
  tool; the math verifier judges the final answer.
- `code-feedback`: write a function; the environment runs the tests in the sandbox and answers
  with the failures (inputs and what the program did -- never the hidden expected outputs), up
  to `max_attempts` attempts; the final attempt is scored, less an optional cost per attempt.
"""
from __future__ import annotations

import hashlib
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr.core import BaseReward, Completion, Task, Verdict
from rlvr.envs.registry import register_env
from rlvr.verifiers.code import CodeTests, extract_code
from rlvr.verifiers.format import ThinkFormat
from rlvr.verifiers.numeric import NumericMatch
from rlvr.verifiers.parser import ThinkParser
from rlvr.verifiers.tools import Toolbox, calculator, python_tool

from .base import ProceduralSource, RowSource
from .code import CodeEnvironment
from .multiturn import Episode, MultiTurnEnvironment, Reply, ToolEnvironment

__all__ = ["BigArithmeticSource", "ToolCallRan", "tool_arithmetic", "math_python", "code_feedback",
           "CodeFeedbackEnvironment", "attempt_feedback"]

CALC_SYSTEM = (
    "You are a careful assistant with a calculator tool. Numbers this large cannot be "
    "multiplied or added reliably in your head: call the calculator, then reply with the "
    "result as 'Answer: <number>'. For example, to multiply 12 by 34 write "
    '<tool_call>{"name": "calculator", "arguments": {"expression": "12 * 34"}}</tool_call>')


# One worked exchange shown before the question: without it SmolLM2-135M-Instruct called the
# tool in 0 of 28 sampled episodes (no GRPO signal); with it, 7 calls in 12 (docs/multiturn.md).
FEW_SHOT = [
    {"role": "user", "content": "What is 1234 * 5678?"},
    {"role": "assistant", "content": '<tool_call>{"name": "calculator", "arguments": '
                                     '{"expression": "1234 * 5678"}}</tool_call>'},
    {"role": "tool", "name": "calculator", "content": "7006652"},
    {"role": "assistant", "content": "Answer: 7006652"}]


@dataclass(frozen=True)
class BigArithmeticSource(ProceduralSource):
    """`a op b` with `digits`-digit operands; train/test split by a hash of the expression."""
    digits: int = 4
    ops: str = "*"
    test_fraction: float = 0.2
    few_shot: bool = True
    prefix = "tool-arithmetic"

    def __post_init__(self):
        if not 1 <= self.digits <= 30:
            raise ValueError("digits must be between 1 and 30")
        if not self.ops or set(self.ops) - set("+-*"):
            raise ValueError(f"ops must be a non-empty subset of '+-*', got {self.ops!r}")

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"{seed}/{split}/{index}")
        lo, hi = 10 ** (self.digits - 1), 10 ** self.digits - 1
        while True:
            a, b, op = rng.randint(lo, hi), rng.randint(lo, hi), rng.choice(self.ops)
            expr = f"{a} {op} {b}"
            h = int.from_bytes(hashlib.blake2b(expr.encode(), digest_size=8).digest(), "big")
            if ("test" if h / 2**64 < self.test_fraction else "train") == split:
                break
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        question = f"What is {expr}?"
        shots = FEW_SHOT if self.few_shot else []
        prompt = [{"role": "system", "content": CALC_SYSTEM}, *shots,
                  {"role": "user", "content": question}]
        return Task(f"{self.prefix}/{split}/{seed}/{index}", prompt, str(value),
                    {"question": question, "expression": expr})


class ToolCallRan(BaseReward):
    """1.0 when the episode made a tool call that ran (well-formed, a known tool, valid
    arguments, no error), else 0.0 -- a shaping term for *using* the tool, beside the accuracy
    reward, like R1-Zero's format reward beside its accuracy reward (DeepSeek-R1, 2025, §2.2.2).

    It says nothing about the answer: a call on the wrong numbers earns it too, so its weight
    should stay below accuracy's, or a call alone pays as much as a right answer. (pass@k counts
    the answer reward alone either way: `Verdict.solved`.)
    Read from the transcript (tool messages that are not
    `Error: ...`), so `rlvr score` on a `messages` row gives the trainer's verdict."""
    name = "tool_call"

    def _score(self, task: Task, completion: Completion) -> Verdict:
        results = [m for m in getattr(completion, "messages", None) or []
                   if m.get("role") == "tool"]
        ran = sum(not str(m.get("content") or "").startswith("Error:") for m in results)
        return Verdict(float(ran > 0), extracted=ran,
                       reason=f"{ran} of {len(results)} tool calls ran")


def gold_episode(task: Task) -> Episode:
    """The episode a perfect policy plays: one calculator call, then `Answer: N`."""
    from .multiturn import episode_from_messages
    args = {"expression": task.metadata["expression"]}
    call = {"type": "function", "function": {"name": "calculator", "arguments": args}}
    return episode_from_messages([
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "calculator", "content": task.answer},
        {"role": "assistant", "content": f"Answer: {task.answer}"}])[1]


@register_env("tool-arithmetic")
def tool_arithmetic(digits: int = 4, ops: str = "*", max_turns: int = 3, max_tokens: int = 256,
                    tool_deadline_s: float = 5.0, few_shot: bool = True,
                    call_reward: float = 0.0) -> ToolEnvironment:
    """Big-number arithmetic with a `calculator` tool; exact match on the final number.
    `few_shot` shows one worked tool exchange before the question; `call_reward` > 0 adds
    `ToolCallRan` with that weight (shaping; the accuracy component is logged on its own).

    >>> env = tool_arithmetic()
    >>> task = env.get_task("tool-arithmetic/train/0/0")
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    if not 0.0 <= call_reward < 1.0:
        raise ValueError(f"call_reward must be in [0, 1) (below accuracy's weight 1), got "
                         f"{call_reward}")
    parser = ThinkParser()
    return ToolEnvironment(
        name="tool-arithmetic", source=BigArithmeticSource(digits, ops, few_shot=few_shot), version="1",
        parser=parser, rewards=[(NumericMatch(parser), 1.0), (ToolCallRan(), call_reward)],
        gold=gold_episode,
        description="Arithmetic on big numbers with a calculator tool (multi-turn).",
        max_turns=max_turns, max_tokens=max_tokens,
        toolbox=Toolbox([calculator], deadline_s=tool_deadline_s))


PYTHON_SYSTEM = (
    " You may call the `python` tool to run a Python program (each call starts fresh; print "
    "what you need). When you are done, give the final answer in <answer> </answer> tags.")


@register_env("math-python")
def math_python(data: str | None = None, split: str = "train", config: str | None = None,
                limit: int | None = None, max_turns: int = 4, max_tokens: int = 1536,
                tool_deadline_s: float = 15.0, deadline_s: float = 5.0) -> ToolEnvironment:
    """Math problems with a sandboxed, stateless `python` tool (stdout returned, truncated);
    MathReward judges the final answer. `data` as for the `math` environment."""
    from rlvr.verifiers.math import MathReward

    from .math import load_rows, rows_to_math_tasks
    tasks = rows_to_math_tasks(load_rows(data, split, config, None, limit), split, "chat")
    for t in tasks:
        t.prompt = [{**t.prompt[0], "content": t.prompt[0]["content"] + PYTHON_SYSTEM},
                    *t.prompt[1:]]
    parser = ThinkParser()
    return ToolEnvironment(
        name="math-python", source=RowSource({split: tasks}), version="1", parser=parser,
        rewards=[(MathReward(parser, deadline_s=deadline_s), 1.0), (ThinkFormat(parser), 0.0)],
        description="Math with a sandboxed python tool; final-answer equivalence.",
        max_turns=max_turns, max_tokens=max_tokens,
        toolbox=Toolbox([python_tool], deadline_s=tool_deadline_s))


# --------------------------------------------------------------------------- code-feedback

def _call(entry: str, args) -> str:
    return f"{entry}({', '.join(repr(a) for a in args)})"[:200]


def attempt_feedback(code: str, tests: CodeTests, reward) -> tuple[bool, str]:
    """(all passed, feedback text) for one attempt, run by `reward` (a CodeReward) in its
    sandbox. Failures show the input and what the program did, never the expected output."""
    from rlvr.verifiers.code import DRIVER, _check_case, _parse_channel, record_kinds
    from rlvr.verifiers.code_driver import decode
    limits, files = reward._request(code, tests)
    res = reward.sandbox.run(DRIVER.read_text(), files=files, limits=limits)
    if res.status == "infra_error":
        return False, "The test harness is unavailable right now; try again."
    n = len(tests.cases)
    records, problem = _parse_channel(res.channel, n, record_kinds(tests))
    if problem:
        return False, f"0/{n} tests passed: {problem}."
    lines = []
    for i, case in enumerate(tests.cases):
        rec = records.get(i)
        if rec is None:
            why = f"no result ({res.reason or res.status})"
        elif not _check_case(case, rec, tests, reward.float_tol):
            continue
        elif tests.entry_point is None:
            why = "timed out" if rec.get("timeout") else \
                f"wrong output (exit code {rec.get('rc')}): {str(rec.get('stdout', ''))[:200]!r}"
        elif "error" in rec:
            why = f"raised {str(rec['error'])[:200]}"
        elif "values" in rec:       # an assert's calls (MBPP-style rows): what each returned
            why = "failed its assert: " + "; ".join(
                f"returned {repr(decode(r['value']))[:80]}" if "value" in r
                else f"raised {r['error'][:80]}" for r in rec["values"])[:200]
        else:
            why = f"returned a wrong value: {repr(decode(rec['value']))[:120]}"
        shown = ", ".join(case.input)[:200] if case.check == "assert" else \
            _call(tests.entry_point, case.input) if tests.entry_point else \
            f"stdin {str(case.input)[:120]!r}"
        lines.append(f"- test {i}: {shown} {why}")
    if not lines:
        return True, f"All {n} tests passed."
    return False, f"{n - len(lines)}/{n} tests passed. Failing:\n" + "\n".join(lines[:5]) + \
        "\nFix the code and answer with the whole corrected function in a ```python block."


@dataclass
class CodeFeedbackEnvironment(MultiTurnEnvironment, CodeEnvironment):
    """Answers each attempt with its test failures until the tests pass or attempts run out."""
    feedback_reward: object = None

    def respond_batch(self, tasks, episodes):
        with ThreadPoolExecutor(4) as ex:
            return list(ex.map(self.respond, tasks, episodes))

    def respond(self, task: Task, episode: Episode) -> Reply:
        if episode.turns >= self.max_turns:      # the reward scores the last attempt
            return Reply(done=True, reason="max_turns")
        code = extract_code(self.parser.parse(episode.text).answer)
        if code is None:
            return Reply([{"role": "user", "content": "I found no ```python code block in your "
                           "answer. Put the whole function in one ```python block."}])
        passed, text = attempt_feedback(code, task.answer, self.feedback_reward)
        if passed:
            return Reply(done=True, reason="stop")
        return Reply([{"role": "user", "content": text}])


@register_env("code-feedback")
def code_feedback(data: str | None = None, split: str = "train", max_attempts: int = 3,
                  attempt_cost: float = 0.0, backend: str = "process",
                  all_or_nothing: bool = False, wall_s: float = 10.0, max_tokens: int = 2048,
                  pooled: bool = True) -> CodeFeedbackEnvironment:
    """Write a function, see the failing tests, fix it: up to `max_attempts` attempts; the final
    attempt is scored like `code` (fraction of tests passed), less `attempt_cost` per extra
    attempt. Rows as for the `code` environment."""
    from rlvr.sandbox.base import Limits
    from rlvr.verifiers.code import CodeReward

    from rlvr.rows import read_rows

    from .code import DECLARED_FLOAT_TOL, SAMPLES, _gold, code_reward, code_tasks
    from .multiturn import FinalAttempt
    tasks = code_tasks(read_rows(data or SAMPLES, split), "code-feedback")
    parser = ThinkParser()
    final = FinalAttempt(code_reward(backend, all_or_nothing, wall_s, pooled, parser,
                                     float_tol=DECLARED_FLOAT_TOL), attempt_cost)
    return CodeFeedbackEnvironment(
        name="code-feedback", source=RowSource({split: tasks}), version="1", parser=parser,
        rewards=[(final, 1.0)], gold=_gold,
        description="Code with test feedback over several attempts; the final attempt scores.",
        max_turns=max_attempts, max_tokens=max_tokens,
        feedback_reward=CodeReward(backend=backend, limits=Limits(wall_s=wall_s, cpu_s=wall_s),
                                   parser=parser, float_tol=DECLARED_FLOAT_TOL))
