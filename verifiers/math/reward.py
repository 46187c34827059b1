r"""MathReward: the math verifier behind the `Reward` interface.

Layers, cheapest first (docs/math.md has the policy and the numbers):

1. extraction (`extract.find_final`) and normalisation (`normalize.split_answer`) in the calling
   process, linear in what they read (an answer over `normalize.MAX_ANSWER_CHARS` or nested
   deeper than `MAX_ANSWER_DEPTH` is wrong unread: `ok`, 0, "answer too large/deep") and under
   the reward's deadline where a timer can be set; the gold's parse is cached, since a GRPO group
   scores G completions of one gold. A completion cut by the length limit gets no "last value
   written" fallback unless `last_value_if_truncated`;
2. the fast path (`compare.decide` without sympy): exact text, plain numbers, text answers,
   multiple-choice letters, structure (hedges, incomplete lists) -- most verdicts end here;
3. the symbolic path (`symbolic.item_equal`: latex2sympy2 + sympy) for what is left, sent to the
   rlvr worker pool with a hard deadline per comparison (from any thread, from asyncio), or
   inline under a CPU-timer deadline inside another pool's worker. An answer that cannot be
   compared within the deadline is the policy's doing (the gold is trusted and cheap): it is
   wrong (`ok`, score 0, "answer too costly to compare"), never a `timeout` that training skips.
"""
from __future__ import annotations

import functools
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Sequence

from rlvr.core import (ERROR, GOLD_UNPARSEABLE, INFRA_ERROR, OK, UNPARSED, BaseReward,
                       Completion, Task, Verdict, as_completion)
from rlvr.pool import WorkerPool, default_pool, in_pool_worker

from ..parser import ThinkParser
from .compare import Decision, decide
from .domain import positive_names
from .echo import written_back
from .extract import find_final, gold_boxes
from .normalize import Answer, is_text, parse_number, split_answer, too_big

__all__ = ["MathReward", "GoldAnswer", "parse_gold", "symbolic_job", "VERSION"]

VERSION = "4"
# a task asking for every solution: a set of one element lists that one solution
_ASKS_ALL = re.compile(r"\b(?:all\s+(?:the\s+)?(?:real\s+|complex\s+|possible\s+|integer\s+)*"
                       r"(?:solutions?|values?|roots?|zeros?|numbers?)|solution\s+set|set\s+of\s+all|"
                       r"separated\s+by\s+commas?)\b", re.I)
_MC_GOLD = re.compile(r"^\(?([A-J])\)?$")
_MC_LEAD = re.compile(r"^\s*(?i:answer|option|choice)?\s*[:：]?\s*\(?([A-J])\)?(?![\w'])")
_MC_MORE = re.compile(r"\s*(?:,|/|\bor\b|\band\b|&)\s*\(?([A-J])\)?(?![\w'])")


@dataclass(frozen=True)
class GoldAnswer:
    """A parsed gold answer: its values, or why it cannot be read; `letter` for MC golds."""
    answer: Answer | None
    text: str = ""
    letter: str = ""
    problem: str = ""
    is_text: bool = False


@functools.lru_cache(maxsize=16384)
def parse_gold(gold: str) -> GoldAnswer:
    """Gold strings as datasets store them: `72`, `$\\frac12$`, `\\boxed{..}`, `... #### 72`."""
    if "####" in gold:
        gold = gold.rsplit("####", 1)[1]
    found = find_final(gold, trusted=True) \
        if re.search(r"\\boxed|\\fbox|answer|<answer>", gold, re.I) else None
    parts = found.parts if found else (gold,)
    if found and found.source == "boxed" and len(parts) > 1:
        parts = gold_boxes(gold) or parts
    parts = [re.sub(r"^\s*\$+|\$+\s*$", "", p.strip()).strip() for p in parts]
    big = next((why for p in parts if (why := too_big(p))), "")
    if big:
        return GoldAnswer(None, problem=f"gold {big}")
    text = " | ".join(p for p in parts if p)
    if not text:
        return GoldAnswer(None, problem="empty gold answer")
    # several boxes (`\boxed{1}\boxed{2}`, "\boxed{1} papers and \boxed{2} bins"): one
    # multi-part gold, as several boxes in a completion are read
    answer = _combine([split_answer(p) for p in parts if p]) if len(parts) > 1 \
        else _restated(parts[0])
    if not answer.items:
        return GoldAnswer(None, text, problem=f"gold {gold[:80]!r} has no value")
    letter = ""
    if len(answer.items) == 1:
        m = _MC_GOLD.match(answer.items[0].text.strip())
        letter = m.group(1) if m else ""
    words = len(answer.items) == 1 and is_text(answer.items[0].text)
    return GoldAnswer(answer, text, letter, is_text=words)


_RESTATED = re.compile(r"(\(\s*)?\b(?:i\.\s?e\.|that is|or equivalently|equivalently|namely)"
                       r"(?!\w)\s*,?\s*", re.I)


def _restated(gold: str) -> Answer:
    """A gold stating one value two ways ("P(6, 2), i.e. 30"): one answer, either form right.
    A plain number is the main reading (it never needs sympy); the other form is a second
    reading, and a wrong answer is not excused because sympy cannot read that form."""
    m = _RESTATED.search(gold)
    if not m or not gold[:m.start()].strip() or not gold[m.end():].strip():
        return split_answer(gold)
    first, second = gold[:m.start()].strip().rstrip(",;").strip(), gold[m.end():].strip()
    if m.group(1) and second.endswith(")"):
        second = second[:-1].strip()              # "30 (i.e. P(6, 2))"
    forms = [split_answer(first), split_answer(second)]
    forms.sort(key=lambda a: len(a.items) != 1 or parse_number(a.items[0].text) is None)
    main, other = forms
    return Answer(main.items, main.ordered, gold,
                  main.alternatives + other.readings())


def question_text(task: Task) -> str:
    """The task's question as written: `metadata['question']` (what the math environments
    keep), else the prompt's user turns."""
    q = task.metadata.get("question") if isinstance(task.metadata, dict) else None
    if isinstance(q, str) and q:
        return q
    if isinstance(task.prompt, str):
        return task.prompt
    if isinstance(task.prompt, (list, tuple)):
        return "\n".join(str(m.get("content", "")) for m in task.prompt
                         if isinstance(m, dict) and m.get("role", "user") == "user")
    return ""


def _gold_text(answer) -> str:
    if isinstance(answer, (list, tuple)):
        return ", ".join(str(a) for a in answer)
    return str(answer)


def _mc_letters(part: str) -> list[str]:
    """Letters a multiple-choice answer names, in any wrapper: `(B)`, `\\textbf{(B)}`,
    `B) 12`, `Answer: B`, `A or B` (a hedge: two letters)."""
    from .normalize import normalize
    s = normalize(part)
    m = _MC_LEAD.match(s)
    if not m:
        return []
    letters, pos = [m.group(1)], m.end()
    while (n := _MC_MORE.match(s, pos)):
        letters.append(n.group(1))
        pos = n.end()
    return list(dict.fromkeys(letters))


def symbolic_job(_ctx, item) -> Decision:
    """In a pool worker: the full (symbolic) decision for one (gold, pred) pair."""
    from .symbolic import GoldUnreadable, TooLarge, Unreadable, item_equal
    from .symbolic import positive_symbols
    gold, pred, positive = item if len(item) == 3 else (*item, frozenset())
    try:
        with positive_symbols(positive):
            d = decide(gold, pred, item_eq=item_equal)
    except GoldUnreadable as exc:
        return Decision(False, str(exc), GOLD_UNPARSEABLE)
    except TooLarge as exc:
        return Decision(False, f"answer too large to compare: {exc}", UNPARSED)
    except Unreadable as exc:
        return Decision(False, str(exc), UNPARSED)
    if d.equal is None:
        return Decision(False, "could not decide", d.status)
    return d


class _TooSlow(BaseException):
    """Raised by the inline deadline's timer inside a symbolic comparison; a BaseException (like
    KeyboardInterrupt), so the libraries' `except Exception:` fallbacks do not swallow it."""


@contextmanager
def _inline_deadline(seconds: float):
    """Interrupt inline symbolic work after `seconds` of wall time with a SIGALRM timer.

    Only in a process's main thread (a pool worker's case); elsewhere it does nothing and the
    caller's deadline applies. An outer Python-level SIGALRM timer (pytest-timeout, a caller's
    own) is saved and re-armed with its remaining time; one that fires sooner is left alone.
    Hand-written because the libraries for this (timeout-decorator, func-timeout) either
    clobber an existing timer or leave the work running in a thread."""
    outer = signal.getsignal(signal.SIGALRM) if _in_main_thread() else None
    remaining, interval = signal.getitimer(signal.ITIMER_REAL)
    if outer is None or (remaining and remaining <= seconds):
        yield                  # not ours to set (another thread, a C-level handler), or moot
        return

    armed = [True]

    def expire(_signum, _frame):
        if armed[0]:                  # a tick after the work ended (a loaded machine) is moot
            raise _TooSlow
    start = time.monotonic()
    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)    # re-fires until the work stops
    try:
        yield
    finally:
        armed[0] = False              # before any call: a tick raising here would leave the
        signal.setitimer(signal.ITIMER_REAL, 0)      # timer re-firing with no handler left
        signal.signal(signal.SIGALRM, outer)
        if remaining:
            left = max(remaining - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


@functools.lru_cache(maxsize=1)
def _warm_symbolic() -> None:
    """Import the symbolic stack and run one comparison, outside any deadline: a first call
    spends seconds importing sympy and the LaTeX parser, which is neither the answer's cost nor
    safe to interrupt (a half-run import leaves modules broken)."""
    from latex2sympy2_extended.math_normalization import NormalizationConfig  # noqa: F401
    from math_verify import verify  # noqa: F401
    from .symbolic import item_equal
    item_equal("2\\sqrt{2}", "\\sqrt{8}")


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def too_costly(text: str, deadline_s: float) -> Verdict:
    """The verdict on an answer no comparison finished within the deadline: wrong, and why."""
    return Verdict(0.0, OK, text, f"answer too costly to compare: no verdict within "
                                  f"{deadline_s:g}s")


class MathReward(BaseReward):
    r"""1.0 when the completion's final answer equals the gold answer (policy: docs/math.md).

    `symbolic`: where the sympy comparisons run -- 'pool' (the rlvr worker pool, hard
    `deadline_s` per comparison), 'inline' (this process: `deadline_s` enforced by a timer in
    a main thread, by the caller elsewhere, e.g. a pool worker's deadline), or 'auto' (inline
    inside an rlvr worker, else pool). A comparison past `deadline_s` is a wrong answer.

    `last_value_if_truncated`: whether a completion cut by the length limit (`finish_reason`
    'length') that states no answer (no tag, box or answer statement) is still read by the
    fallback, "the last value written". Off by default: such a completion never finished, and
    the last number of an interrupted calculation is not an answer (docs/math.md).

    >>> from rlvr import Task
    >>> r = MathReward()
    >>> r.score(Task("t", answer="\\frac{1}{2}"), "<think>..</think> so \\boxed{0.5}").score
    1.0
    >>> r.score(Task("t", answer="3"), "It is \\boxed{3} or \\boxed{4}.").score
    0.0
    """
    name, version = "math", VERSION

    def __init__(self, parser: ThinkParser | None = None, *, deadline_s: float = 5.0,
                 symbolic: str = "auto", pool: WorkerPool | None = None, name: str = "math",
                 last_value_if_truncated: bool = False):
        if symbolic not in ("auto", "pool", "inline"):
            raise ValueError(f"symbolic must be 'auto', 'pool' or 'inline', got {symbolic!r}")
        if deadline_s <= 0:
            raise ValueError("deadline_s must be positive")
        self.parser = parser or ThinkParser()
        self.deadline_s = deadline_s
        self.symbolic = symbolic
        self._pool = pool
        self.name = name
        self.last_value_if_truncated = last_value_if_truncated

    @property
    def max_verify_s(self) -> float:
        """Reading a completion and at most one symbolic comparison share `deadline_s`: what an
        outer deadline (a scoring pool's) must leave room for."""
        return self.deadline_s

    def __getstate__(self):            # pools hold locks and pipes: rebuilt where unpickled
        state = dict(self.__dict__)
        state["_pool"] = None
        return state

    def _score(self, task: Task, completion: Completion) -> Verdict:
        return self.score_batch([task], [completion])[0]

    # -- the three stages
    def _prepare(self, task: Task, completion: Completion) -> Verdict | tuple:
        """Read gold and prediction; a Verdict when that already decides, else the pair."""
        if task.answer is None:
            return Verdict(0.0, GOLD_UNPARSEABLE, reason="task has no gold answer")
        gold = parse_gold(_gold_text(task.answer))
        if gold.answer is None:
            return Verdict(0.0, GOLD_UNPARSEABLE, reason=gold.problem)
        parsed = self.parser.parse(completion.text)
        if not parsed.answer:
            why = "think block never closed" if parsed.think_present else "empty completion"
            return Verdict(0.0, UNPARSED, reason=why)
        found = find_final(parsed.answer, mc=bool(gold.letter), text_gold=gold.is_text)
        if found is None:
            return Verdict(0.0, UNPARSED, reason="no final answer found")
        if not found.parts:
            return Verdict(0.0, UNPARSED, reason=found.refused or "no final answer found")
        big = next((why for p in found.parts if (why := too_big(p))), "")
        if big:
            return Verdict(0.0, OK, found.text[:200], big)
        if found.source == "last_value" and completion.finish_reason == "length" \
                and not self.last_value_if_truncated:
            return Verdict(0.0, UNPARSED, reason="cut at the length limit before stating an "
                                                 "answer (no tag, box or answer statement)")
        if gold.letter:
            letters = sorted({x for p in found.parts for x in _mc_letters(p)})
            if not letters:
                return Verdict(0.0, OK, found.text, f"no choice letter in {found.text[:60]!r}")
            if len(letters) > 1:
                return Verdict(0.0, OK, found.text, f"hedged: letters {', '.join(letters)}")
            ok = letters[0] == gold.letter
            return Verdict(float(ok), OK, found.text, "" if ok else f"{letters[0]} != {gold.letter}")
        question = question_text(task)
        listing = bool(_ASKS_ALL.search(question))
        pred = _combine([split_answer(p, set_is_list=listing) for p in found.parts])
        if written_back(pred.items, gold.answer.items, question):
            return Verdict(0.0, OK, found.text, "the question's expression written back")
        return (gold.answer, pred, found.text, positive_names(question + " " + gold.text))

    def score_batch(self, tasks: Sequence[Task], completions: Sequence) -> list[Verdict]:
        if len(tasks) != len(completions):
            raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
        out: list[Verdict | None] = [None] * len(tasks)
        pending, starts = [], [0.0] * len(tasks)
        for i, (task, comp) in enumerate(zip(tasks, completions)):
            starts[i] = time.perf_counter()
            read = self._read(task, as_completion(comp))
            if isinstance(read, Verdict):
                out[i] = read
                out[i].latency_s = time.perf_counter() - starts[i]
            else:
                pending.append((i, *read, time.perf_counter() - starts[i]))
        if pending:
            self._symbolic(pending, out, starts)
        for v in out:
            v.version = f"{self.name}@{self.version}"
        return out  # type: ignore[return-value]

    def _read(self, task: Task, completion: Completion) -> Verdict | tuple:
        """Reading and the fast path, under the deadline where a timer can be set: a Verdict,
        or (gold, pred, text) for the symbolic path."""
        try:
            with _inline_deadline(self.deadline_s):
                prep = self._prepare(task, completion)
                if isinstance(prep, Verdict):
                    return prep
                gold, pred = prep[:2]
                d = decide(gold, pred)
                return prep if d.equal is None else _to_verdict(d, prep[2])
        except _TooSlow:
            return Verdict(0.0, OK, reason=f"answer too costly to read: not read within "
                                           f"{self.deadline_s:g}s")
        except Exception as exc:          # the model-output boundary: counted, never scored
            return Verdict(0.0, ERROR, reason=f"{type(exc).__name__}: {exc}")

    def _symbolic(self, pending, out, starts) -> None:
        """The comparisons the fast path left open; each gets what reading left of
        `deadline_s`, so reading and comparing together stay within it."""
        jobs = [(gold, pred, positive) for _, gold, pred, _, positive, _ in pending]
        inline = self.symbolic == "inline" or (self.symbolic == "auto" and in_pool_worker())
        if inline:
            _warm_symbolic()
            for (i, _, _, text, _, spent), job in zip(pending, jobs):
                try:
                    with _inline_deadline(max(self.deadline_s - spent, 1e-3)):
                        decision = symbolic_job(None, job)
                    out[i] = _to_verdict(decision, text)
                except _TooSlow:
                    out[i] = too_costly(text, self.deadline_s)
                except Exception as exc:
                    out[i] = Verdict(0.0, ERROR, text, f"{type(exc).__name__}: {exc}")
                out[i].latency_s = time.perf_counter() - starts[i]
            return
        pool = self._pool or default_pool()
        left = max(self.deadline_s - max(p[-1] for p in pending), 1e-3)
        outcomes = pool.map(symbolic_job, jobs, deadline_s=left)
        for (i, _, _, text, _, _), o in zip(pending, outcomes):
            if o.status == "ok":
                out[i] = _to_verdict(o.value, text)
            elif o.status == "timeout":
                out[i] = too_costly(text, self.deadline_s)
            else:           # a worker that died on this call, or a pool that cannot start
                status = INFRA_ERROR if o.status == "infra_error" else ERROR
                out[i] = Verdict(0.0, status, text, o.error)
            out[i].latency_s = time.perf_counter() - starts[i]


def _combine(answers: list[Answer]) -> Answer:
    """Several boxes / statements read together: their values in one (multi-part) answer."""
    if len(answers) == 1:
        return answers[0]
    items = tuple(it for a in answers for it in a.items)
    return Answer(items, any(a.ordered for a in answers), " | ".join(a.raw for a in answers))


def _to_verdict(d: Decision, text: str) -> Verdict:
    if d.status != OK:
        return Verdict(0.0, d.status, text, d.reason)
    return Verdict(1.0 if d.equal else 0.0, OK, text, d.reason)
