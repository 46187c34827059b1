"""The `judge` environment: any environment's tasks, scored by an LLM judge against a rubric.

    rlvr score --env judge --env-arg base_env=math --env-arg model=smollm2 rows.jsonl -o out.jsonl
    rlvr score --env judge --env-arg endpoint=http://localhost:8000/v1 \\
        --env-arg model=Qwen/Qwen2.5-7B-Instruct --env-arg samples=5 --env-arg temperature=0.7 \\
        rows.jsonl -o out.jsonl
    rlvr audit --env judge --env-arg base_env=math --strategies 'injection,wrong-*,gold-*'

Tasks, prompts, gold answers and the gold completion come from `base_env`; the judge's reward
(`JudgeReward`, rlvr.verifiers.judge) has weight `weight`, and the base environment's own
rewards stay in the mix with their weights times `verifier_weight` -- 0 by default: logged in
`Verdict.components` beside the judge's score, not trained on. The rubric, the judge's prompt
template and the parsing rule are arguments (`rubric=...`, `template=...`, `score_line=...`),
as is every other `JudgeConfig` field.
"""
from __future__ import annotations

from rlvr.envs.registry import EnvArgumentError, load_env, register_env
from rlvr.verifiers.judge import JudgeConfig, JudgeReward

from .base import Environment, rescored

__all__ = ["judge_env"]


@register_env("judge")
def judge_env(base_env: str = "math", base_env_args: dict | None = None, weight: float = 1.0,
              verifier_weight: float = 0.0, **judge_args) -> Environment:
    """`base_env`'s tasks scored by a judge model; keyword arguments not named here are
    `JudgeConfig` fields (`model`, `endpoint`, `rubric`, `template`, `score_line`, `samples`,
    `temperature`, `retries`, `timeout_s`...).

    >>> env = judge_env("math", model="smollm2")                             # doctest: +SKIP
    >>> env.reward.score(task, completion).components                        # doctest: +SKIP
    {'judge': 1.0, 'math': 1.0, 'think_format': 1.0}
    """
    unknown = set(judge_args) - set(JudgeConfig.__dataclass_fields__)
    if unknown:
        raise EnvArgumentError(f"environment 'judge': unknown argument(s) {sorted(unknown)}; it takes base_env, "
                        f"base_env_args, weight, verifier_weight and the JudgeConfig fields "
                        f"{sorted(JudgeConfig.__dataclass_fields__)}")
    judge = JudgeReward(JudgeConfig(**judge_args))
    base = load_env(base_env, check=False, **(base_env_args or {}))
    return rescored(base, judge, weight, verifier_weight, f"Scored by judge {judge.version}.")
