r"""Math environments scored by `rlvr.verifiers.math`.

- `math`: GSM8K / MATH-style rows from a local JSONL / JSON / Parquet file, a directory saved by
  `datasets`, or a Hugging Face dataset id (all through `datasets.load_dataset` /
  `load_from_disk`). Without `data` it serves a few built-in rows, so `rlvr score --env math
  rows.jsonl` works on any file whose rows carry `completion` and `answer`.
- `math-arithmetic`: the procedural arithmetic tasks of `arithmetic`, scored by MathReward.
- `countdown`: reach a target with the given numbers and + - * /, checked by a safe parser.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from rlvr.core import Task
from rlvr.rows import read_rows
from rlvr.splits import hash_split
from rlvr.envs.registry import register_env
from rlvr.verifiers.format import ThinkFormat
from rlvr.verifiers.math import MathReward, parse_gold
from rlvr.verifiers.math.countdown import CountdownReward
from rlvr.verifiers.parser import ThinkParser

from .arithmetic import ArithmeticSource
from .base import Environment, ProceduralSource, RowSource, r1_base_prompt, r1_chat_prompt
from .countdown_search import countdown_teacher

__all__ = ["load_rows", "rows_to_math_tasks", "CountdownSource", "math_env", "math_arithmetic",
           "countdown", "BUILTIN_ROWS", "BOXED_INSTRUCTION"]

QUESTION_FIELDS = ("question", "problem", "prompt", "query", "input")
ANSWER_FIELDS = ("answer", "final_answer", "expected_answer", "solution", "target", "gold")
BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

# A handful of rows in both dataset styles: the default source (contract checks, `rlvr score`
# on files that carry their own gold answers) and a smoke test of the reading path.
BUILTIN_ROWS = [
    {"id": "builtin/0", "question": "Natalia sold clips to 48 of her friends in April, and then "
     "she sold half as many clips in May. How many clips did she sell altogether?",
     "answer": "In May she sold 48/2 = 24 clips.\nAltogether 48+24 = 72 clips.\n#### 72"},
    {"id": "builtin/1", "problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?",
     "solution": "Common denominator 6: $\\frac{3}{6}+\\frac{2}{6} = \\boxed{\\frac{5}{6}}$."},
    {"id": "builtin/2", "problem": "Solve $x^2 - 5x + 6 = 0$.", "answer": "2, 3"},
    {"id": "builtin/3", "problem": "For which $x$ is $2x - 4 > 0$?", "answer": "(2, \\infty)"},
    {"id": "builtin/4", "problem": "Simplify $\\sqrt{50}$.", "answer": "5\\sqrt{2}"},
]


def load_rows(data: str | None = None, split: str = "train", config: str | None = None,
              cache_dir: str | None = None, limit: int | None = None) -> list[dict]:
    """Rows from a local file or directory, or a Hugging Face dataset id (`rlvr.rows`);
    `config` and `cache_dir` go to `datasets.load_dataset` for hub ids."""
    if data is None:
        return [dict(r) for r in BUILTIN_ROWS][:limit]
    return read_rows(data, split, limit=limit, config=config, cache_dir=cache_dir)


def _field(row: dict, wanted: str | None, choices: tuple[str, ...], what: str) -> str:
    if wanted:
        if wanted not in row:
            raise KeyError(f"row has no {what} field {wanted!r}; it has {sorted(row)}")
        return wanted
    for name in choices:
        if row.get(name) not in (None, ""):
            return name
    raise KeyError(f"row has none of the {what} fields {list(choices)}; it has {sorted(row)} "
                   f"(pass {what}_field=...)")


def rows_to_math_tasks(rows: list[dict], split: str, prompt_style: str = "chat",
                       question_field: str | None = None,
                       answer_field: str | None = None) -> list[Task]:
    """Rows -> Tasks whose `answer` is the final answer (`#### 72` -> `72`, `\\boxed{}` read),
    the full solution kept in `metadata['solution']`."""
    tasks = []
    for i, row in enumerate(rows):
        q = _field(row, question_field, QUESTION_FIELDS, "question")
        a = _field(row, answer_field, ANSWER_FIELDS, "answer")
        gold = parse_gold(str(row[a]))
        if gold.answer is None:
            raise ValueError(f"row {i} ({row.get('id', '')}): {gold.problem}")
        question = str(row[q])
        prompt = {"chat": lambda: r1_chat_prompt(question),
                  "base": lambda: r1_base_prompt(question),
                  "boxed": lambda: [{"role": "user",
                                     "content": f"{question}\n{BOXED_INSTRUCTION}"}]}[prompt_style]()
        meta = {k: v for k, v in row.items() if k not in (q, a, "id")}
        meta.update(question=question, solution=str(row[a]))
        tasks.append(Task(id=str(row.get("id", f"math/{split}/{i}")), prompt=prompt,
                          answer=gold.text, metadata=meta))
    return tasks


def _check_style(prompt_style: str) -> None:
    if prompt_style not in ("chat", "base", "boxed"):
        raise ValueError(f"prompt_style must be 'chat', 'base' or 'boxed', got {prompt_style!r}")


def _rewards(parser: ThinkParser, reward, format_weight: float) -> list:
    return [(reward, 1.0), (ThinkFormat(parser), format_weight)]


@register_env("math")
def math_env(data: str | None = None, split: str = "train", config: str | None = None,
             question_field: str | None = None, answer_field: str | None = None,
             prompt_style: str = "chat", limit: int | None = None, cache_dir: str | None = None,
             deadline_s: float = 5.0, format_weight: float = 0.0,
             last_value_if_truncated: bool = False) -> Environment:
    r"""GSM8K / MATH-style problems scored by MathReward (answer equivalence, docs/math.md).

    `data`: a JSONL/JSON/Parquet file, a `save_to_disk` directory, or a hub id such as
    `openai/gsm8k` (with `config="main"`); None serves the built-in rows. Question and answer
    fields are found by name (`question`/`problem`..., `answer`/`solution`...) unless given.
    `last_value_if_truncated`: read "the last value written" also from completions cut by the
    length limit (off: such a completion, stating no answer, is `unparsed`; docs/math.md).

    >>> env = math_env()
    >>> task = env.get_task("builtin/0")
    >>> task.answer, env.reward.score(task, "<think>48+24</think> <answer>72</answer>").score
    ('72', 1.0)
    """
    _check_style(prompt_style)
    rows = load_rows(data, split, config, cache_dir, limit)
    tasks = rows_to_math_tasks(rows, split, prompt_style, question_field, answer_field)
    return math_rows_env("math", tasks, split, prompt_style, deadline_s, format_weight,
                         "Math word problems and competition maths; final-answer equivalence.",
                         last_value_if_truncated)


def math_rows_env(name: str, tasks: list[Task], split: str, prompt_style: str,
                  deadline_s: float, format_weight: float = 0.0,
                  description: str = "", last_value_if_truncated: bool = False) -> Environment:
    """An environment over fixed math tasks scored by MathReward (plus an optional format
    reward), with a gold completion in the prompt style's shape: what `math` and the standard
    benchmarks (rlvr.envs.benchmarks) share."""
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    reward = MathReward(parser, deadline_s=deadline_s,
                        last_value_if_truncated=last_value_if_truncated)
    env = Environment(
        name=name, source=RowSource({split: tasks}), version="1", parser=parser,
        rewards=_rewards(parser, reward, format_weight),
        description=description)
    if prompt_style == "base":
        env.gold = lambda t: f" I work it out.</think> <answer>{t.answer}</answer>"
    elif prompt_style == "boxed":
        env.gold = lambda t: f"<think>I work it out.</think> The answer is $\\boxed{{{t.answer}}}$."
    return env


@register_env("math-arithmetic")
def math_arithmetic(n_terms: int = 3, max_value: int = 20, ops: str = "+-*",
                    parentheses: bool = True, test_fraction: float = 0.2,
                    prompt_style: str = "chat", format_weight: float = 0.0,
                    deadline_s: float = 5.0, last_value_if_truncated: bool = False
                    ) -> Environment:
    """The `arithmetic` tasks scored by MathReward instead of exact numeric match, so answers
    such as `\\boxed{42}`, `42.0`, `x = 42` or `The answer is 42` all count
    (`last_value_if_truncated` as in `math`).

    >>> env = math_arithmetic(n_terms=2, max_value=9)
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    source = ArithmeticSource(n_terms, max_value, ops, parentheses, test_fraction, prompt_style)
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    reward = MathReward(parser, deadline_s=deadline_s,
                        last_value_if_truncated=last_value_if_truncated)
    env = Environment(
        name="math-arithmetic", source=source, version="1", parser=parser,
        rewards=_rewards(parser, reward, format_weight),
        description="Integer +,-,* expressions; MathReward on the answer span.")
    if prompt_style == "base":
        env.gold = lambda t: f" I compute it.</think> <answer>{t.answer}</answer>"
    return env


# --------------------------------------------------------------------------- countdown

@dataclass(frozen=True)
class CountdownSource(ProceduralSource):
    """`n_numbers` integers in [1, max_number] and a target in [min_target, max_target] that
    some expression over them reaches (the generator builds one: `metadata['solution']`).
    Train/test are split by a hash of (numbers, target), as in `arithmetic`."""
    prefix = "countdown"
    n_numbers: int = 4
    max_number: int = 99
    min_target: int = 10
    max_target: int = 100
    test_fraction: float = 0.2
    prompt_style: str = "chat"
    splits: tuple = ("train", "test")

    def __post_init__(self):
        if not 2 <= self.n_numbers <= 6:
            raise ValueError("n_numbers must be between 2 and 6")
        if self.max_number < 2 or not 1 <= self.min_target <= self.max_target:
            raise ValueError("need max_number >= 2 and 1 <= min_target <= max_target")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must be strictly between 0 and 1")
        _check_style(self.prompt_style)

    def _split_of(self, numbers: list[int], target: int) -> str:
        return hash_split(f"{sorted(numbers)}->{target}", self.test_fraction)

    def _draw(self, rng: random.Random) -> tuple[list[int], int, str] | None:
        numbers = [rng.randint(1, self.max_number) for _ in range(self.n_numbers)]
        order = rng.sample(range(self.n_numbers), rng.randint(max(2, self.n_numbers - 1),
                                                              self.n_numbers))
        value, text = numbers[order[0]], str(numbers[order[0]])
        for k in order[1:]:
            n = numbers[k]
            op = rng.choice("+-*/")
            if op == "-" and value - n <= 0 or op == "/" and value % n:
                op = "+"
            value = {"+": value + n, "-": value - n, "*": value * n, "/": value // n}[op]
            text = f"({text} {op} {n})" if op in "+-" else f"{text} {op} {n}"
        if self.min_target <= value <= self.max_target:
            return numbers, value, text
        return None

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"countdown/{seed}/{split}/{index}")
        while True:
            drawn = self._draw(rng)
            if drawn and self._split_of(drawn[0], drawn[1]) == split:
                break
        numbers, target, solution = drawn
        question = (f"Using the numbers {numbers}, create an equation that equals {target}. "
                    "You can use + - * / and parentheses, and each number at most once.")
        prompt = (r1_base_prompt(question) if self.prompt_style == "base" else
                  r1_chat_prompt(question + " Give only the expression in <answer> </answer> "
                                 "tags, for example <answer>(1 + 2) * 3</answer>."))
        return Task(id=f"countdown/{split}/{seed}/{index}", prompt=prompt, answer=str(target),
                    metadata={"numbers": numbers, "question": question, "solution": solution})


@register_env("countdown")
def countdown(n_numbers: int = 4, max_number: int = 99, min_target: int = 10,
              max_target: int = 100, test_fraction: float = 0.2, prompt_style: str = "chat",
              use_all: bool = False, format_weight: float = 0.0) -> Environment:
    """Countdown (TinyZero-style): an expression over the given numbers that hits the target.

    >>> env = countdown(n_numbers=3)
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    if prompt_style == "boxed":
        raise ValueError("countdown answers go in <answer> tags: prompt_style 'chat' or 'base'")
    source = CountdownSource(n_numbers, max_number, min_target, max_target, test_fraction,
                             prompt_style)
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    env = Environment(
        name="countdown", source=source, version="1", parser=parser,
        rewards=_rewards(parser, CountdownReward(parser, use_all=use_all), format_weight),
        description="Reach the target with the given numbers and + - * /, each at most once.")
    env.gold = (lambda t: f"<think>Try combinations.</think> <answer>{t.metadata['solution']}"
                "</answer>")
    if prompt_style == "base":
        env.gold = lambda t: f" Try combinations.</think> <answer>{t.metadata['solution']}</answer>"
    env.teacher = countdown_teacher(use_all, lambda t: (t.metadata["numbers"], int(t.answer)))
    return env
