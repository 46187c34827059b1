"""`rlvr audit`: attack an environment with generic exploit strategies before training on it.

On the first N tasks of any registered environment, each strategy builds completions from the
task's own gold and prompt -- wrong answers dressed up to look right, programs that try to pass
without solving, content-free text in the right shape -- and, on the other side, the gold in
other legitimate forms. Every completion is scored by the environment's own reward in the worker
pool, under the deadlines `rlvr score` uses. A wrong strategy that earns reward, an attempt that
ends as `timeout` or `error`, or a legitimate form refused is a finding (docs/audit.md).

    from rlvr.audit import AuditConfig, run_audit
    report = run_audit(AuditConfig("arithmetic", n=3, workers=0))
    print(report.render())
"""
from .report import AuditReport, StrategyResult
from .run import AuditConfig, run_audit, select
from .registry import UnknownStrategyError, get_strategy, list_strategies
from .strategy import KINDS, Attempt, Case, Strategy, register_strategy, task_kind

__all__ = ["AuditConfig", "run_audit", "select", "AuditReport", "StrategyResult", "KINDS",
           "Attempt", "Case", "Strategy", "register_strategy", "list_strategies", "get_strategy",
           "task_kind", "UnknownStrategyError"]
