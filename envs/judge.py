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

Before the environment is handed out, the judge is probed with answer-free "master keys"
(a bare ":", "Thought process:", a note to the grader...; rlvr.verifiers.judge) on the first
`master_key_tasks` tasks: a judge that scores more than `master_key_threshold` of them above 0
is refused (exit 2 on the command line) with the rate it showed (Zhao et al. 2025, *One Token
to Fool LLM-as-a-Judge*); `master_key_threshold=1` turns the probe off.
"""
from __future__ import annotations

from rlvr.envs.registry import EnvArgumentError, load_env, register_env
from rlvr.pool import in_pool_worker
from rlvr.verifiers.judge import JudgeConfig, JudgeReward, refuse_master_keys

from .base import Environment, rescored

__all__ = ["judge_env"]


@register_env("judge")
def judge_env(base_env: str = "math", base_env_args: dict | None = None, weight: float = 1.0,
              verifier_weight: float = 0.0, master_key_threshold: float = 0.1,
              master_key_tasks: int = 2, **judge_args) -> Environment:
    """`base_env`'s tasks scored by a judge model; keyword arguments not named here are
    `JudgeConfig` fields (`model`, `endpoint`, `rubric`, `template`, `score_line`, `samples`,
    `temperature`, `retries`, `timeout_s`...). A judge that passes more than
    `master_key_threshold` of the master-key probes is refused (module docstring).

    >>> env = judge_env("math", model="smollm2")                             # doctest: +SKIP
    >>> env.reward.score(task, completion).components                        # doctest: +SKIP
    {'judge': 1.0, 'math': 1.0, 'think_format': 1.0}
    """
    unknown = set(judge_args) - set(JudgeConfig.__dataclass_fields__)
    if unknown:
        raise EnvArgumentError(f"environment 'judge': unknown argument(s) {sorted(unknown)}; it takes base_env, "
                        f"base_env_args, weight, verifier_weight, master_key_threshold, "
                        f"master_key_tasks and the JudgeConfig fields "
                        f"{sorted(JudgeConfig.__dataclass_fields__)}")
    judge = JudgeReward(JudgeConfig(**judge_args))
    base = load_env(base_env, check=False, **(base_env_args or {}))
    if master_key_threshold < 1 and not in_pool_worker():   # the host probed it already
        tasks = base.sample(master_key_tasks, split=base.source.splits[0])
        refuse_master_keys(judge, tasks, master_key_threshold,
                           "--env-arg master_key_threshold")
    return rescored(base, judge, weight, verifier_weight, f"Scored by judge {judge.version}.")
