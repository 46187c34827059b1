"""Held-out evaluation: unbiased pass@k with confidence bands, from a local model, a trained run or
an OpenAI-compatible endpoint.

The claim to check (Yue et al. 2025, "Does Reinforcement Learning Really Incentivize
Reasoning Capacity in LLMs Beyond the Base Model?"): RLVR raises pass@1, while at large k the base
model solves as many distinct problems or more -- RL sharpens what the model could already sample.
To see it, sample n completions per held-out task, count the c correct ones, and estimate pass@k
for every k <= n with the unbiased estimator of Chen et al. 2021 (rlvr/passk.py), its
uncertainty by a bootstrap over tasks. `rlvr plot passk` draws the curves.

    rlvr eval --env arithmetic --model smollm2 --n 64 --k 1,2,4,8,16,32,64 -o base.json

- **Per-task seeds.** Task i's samples are drawn from a generator seeded by (seed, task id), so
  they do not depend on the order of tasks, on the batch they share, or on how many tasks run.
  (The trainer's per-group seeds key on the group's position instead, which is fixed there.)
- **Correct** means `Verdict.solved`: status `ok` and the answer reward's score >= 1.0 (not
  the weighted total: a format or shaping reward never counts as solving the task). Failed
  verdicts (`error`, `timeout`...) are counted by status.
- **Resumable.** Every finished task's rows go to OUT.samples.jsonl at once; rerunning the same
  command continues after the last finished task (different settings are refused), and the
  samples file is a valid `rlvr score` input (task `id` + `completion`).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlvr.core import Verdict
from rlvr.passk import mean_pass_at_k, pass_at_k, pass_at_k_curve

from rlvr.trainer.evaluation.eval_records import SampleStore, TaskRecord, task_fingerprint, task_seeds

__all__ = ["pass_at_k", "mean_pass_at_k", "distinct_tasks", "EvalConfig", "EvalResult", "evaluate",
           "run_eval", "resolve_env", "resolve_model", "LocalSampler", "evaluate_in_training"]

DEFAULT_ENV = "arithmetic"
"""The environment evaluated when neither `env` nor a run folder names one."""


@dataclass
class EvalConfig:
    """What `rlvr eval` measures. The resolved config is written beside the results."""
    env: str = ""
    """Environment name (`rlvr envs list`). Empty: the environment of the run folder given as
    `model` (or `env_from`), with its arguments -- the tasks the run trained on; arithmetic
    when no run folder names one."""
    env_kwargs: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory; with a run's environment, each one given
    replaces the run's value for that argument."""
    env_from: str = ""
    """An rlvr run folder whose environment and arguments to evaluate on (e.g. a base model on
    the tasks of a trained run); default: `model`'s own, when it is a run folder."""
    model: str = "smollm2"
    """Model folder, hub id, rlvr run directory (its latest policy) or 'smollm2'; with
    `endpoint`, the model name the server serves."""
    tokenizer: str = ""
    """Tokenizer folder or hub id for a local model (default: the model's own). Its chat
    template renders the prompts: to evaluate a base model with the template a run trained
    with (the main job's think-opening one: runs/r1zero/checkpoints/*/policy), pass it here."""
    endpoint: str = ""
    """Base URL of an OpenAI-compatible server (vLLM, SGLang, a hosted API); empty = local."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's API key (unset: no key is sent)."""
    concurrency: int = 8
    """Endpoint requests in flight at once."""
    retries: int = 3
    """Endpoint retries per request (server errors, rate limits, timeouts), with backoff."""
    request_timeout_s: float = 120.0
    """Endpoint deadline per request."""
    n_per_request: int = 0
    """Most samples one endpoint request asks for (0 = all n at once)."""
    label: str = ""
    """Name of this model in plots (default: derived from `model`)."""
    split: str = "test"
    """Split to evaluate on (held out from training)."""
    tasks: int = 200
    """Number of distinct tasks (the first N distinct prompts of the split for `seed`)."""
    ks: tuple = (1, 8, 32)
    """k values reported for pass@k (every k <= n can be recomputed from the counts)."""
    samples: int = 0
    """n, samples per task; 0 = max(ks). More samples lower the estimator's variance."""
    sample_tasks: int = 0
    """Sample the n completions for only the first N tasks (0 = all); greedy covers all."""
    greedy: bool = True
    """Also report greedy pass@1 (one deterministic completion per task)."""
    temperature: float = 1.0
    """Sampling temperature for the n samples."""
    top_p: float = 1.0
    """Nucleus threshold for the n samples."""
    max_completion_length: int = 128
    """Generation limit in tokens."""
    batch_size: int = 256
    """Rows decoded at once (local models); without `continuous_batching`, completions per
    generate call. More rows share each step's fixed costs (the weights read once, one call per
    operation): 256 drew 1.14x the tokens per CPU second of 128 in float32 and 1.23x in
    bfloat16 (SmolLM2-135M, one core). Memory grows with it: about 46 KB per cached token for
    SmolLM2-135M (float32 keys and values), a task's prompt once and each row's completion,
    or the prompt per row where the model's own forward samples (about 2.8 GB at 256 rows of
    240 tokens)."""
    continuous_batching: bool = True
    """Keep one batch of `batch_size` rows full across tasks, refilling finished rows with the
    next tasks' samples (local models), instead of a few tasks per generate call that drains
    as rows finish. The same samples; 1.19x the tokens per CPU second of task pairs on an idle
    CPU core."""
    dtype: str = "float32"
    """Weights and arithmetic of a local model: float32 (the policy's own distribution) or
    bfloat16 (opt-in, faster on CPUs with AVX-512 BF16 or AMX: another numeric format, so a
    slightly different distribution, as a quantized GGUF is; the trainer never samples so)."""
    seed: int = 0
    """Seeds the task list and every task's sampling generator."""
    bootstrap: int = 1000
    """Bootstrap resamples over tasks for the confidence intervals (0 = none)."""
    level: float = 0.95
    """Confidence level of the intervals."""

    def __post_init__(self):
        self.ks = tuple(sorted({int(k) for k in self.ks}))
        if not self.ks or min(self.ks) < 1:
            raise ValueError(f"k values must be >= 1, got {list(self.ks)}")
        if self.samples and self.samples < max(self.ks):
            raise ValueError(f"samples={self.samples} < max k={max(self.ks)}: pass@k needs n >= k")
        if self.sample_tasks < 0 or self.sample_tasks > self.tasks:
            raise ValueError(f"sample_tasks must be in [0, tasks={self.tasks}], got {self.sample_tasks}")
        for name in ("tasks", "max_completion_length", "batch_size", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")
        if self.dtype != "float32" and self.endpoint:
            raise ValueError("dtype applies to local models: an endpoint serves its own format")
        if self.tokenizer and self.endpoint:
            raise ValueError("tokenizer applies to local models: an endpoint renders its own prompts")

    @property
    def n(self) -> int:
        return self.samples or max(self.ks)

    def identity(self) -> dict:
        """The settings a resumed run must share with the run it continues."""
        d = asdict(self)
        # tasks/sample_tasks may grow: the first N distinct tasks and their seeds do not change
        for name in ("concurrency", "retries", "request_timeout_s", "batch_size",
                     "continuous_batching", "bootstrap",
                     "level", "label", "ks", "api_key_env", "tasks", "sample_tasks",
                     "n_per_request", "env_from"):
            d.pop(name)
        for name, default in (("tokenizer", ""), ("dtype", "float32")):
            if d[name] == default:   # runs from before the option still resume
                d.pop(name)
        return d


@dataclass
class EvalResult:
    """pass@k by k (with intervals), greedy pass@1, and what the completions looked like."""
    pass_at: dict[int, float]
    pass_at_ci: dict[int, tuple[float, float]]
    greedy_pass1: float | None
    greedy_pass1_ci: tuple[float, float] | None
    tasks: int
    sampled_tasks: int
    samples: int
    correct_counts: list[int]
    task_ids: list[str]
    statuses: dict[str, int]
    mean_length: float | None
    """Mean completion length in tokens; None when the sampler does not say (an endpoint)."""
    well_formed_rate: float
    seconds: float
    generated: int
    """Completions generated in this invocation (resumed tasks excluded)."""
    resumed_tasks: int = 0
    level: float = 0.95
    label: str = ""
    failed_tasks: dict = field(default_factory=dict)
    """Tasks the sampler could not serve (endpoint errors after retries): left out of every
    number, sampled again by a rerun."""
    task_fingerprints: list[str] = field(default_factory=list)
    """One per entry of `task_ids` (eval_records.task_fingerprint): what each task asked."""

    @property
    def samples_per_s(self) -> float:
        return self.generated / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pass_at"] = {f"pass@{k}": v for k, v in self.pass_at.items()}
        d["pass_at_ci"] = {f"pass@{k}": list(v) for k, v in self.pass_at_ci.items()}
        d["samples_per_s"] = self.samples_per_s
        return d

    def table(self) -> str:
        pct = f"{self.level:.0%} CI"
        lines = [f"{'metric':<16}{'value':>8}   {pct}"]
        if self.greedy_pass1 is not None:
            lo, hi = self.greedy_pass1_ci
            lines.append(f"{'greedy pass@1':<16}{self.greedy_pass1:>8.3f}   [{lo:.3f}, {hi:.3f}]")
        for k, v in self.pass_at.items():
            lo, hi = self.pass_at_ci[k]
            lines.append(f"{f'pass@{k}':<16}{v:>8.3f}   [{lo:.3f}, {hi:.3f}]")
        formed = f"{self.well_formed_rate:.3f}" if self.sampled_tasks else "n/a"
        lines.append(f"{'well-formed':<16}{formed:>8}")
        length = "n/a" if self.mean_length is None else f"{self.mean_length:.1f}"
        lines.append(f"{'mean length':<16}{length:>8}")
        status = ", ".join(f"{s}={c}" for s, c in sorted(self.statuses.items())) or "(none)"
        if self.failed_tasks:
            lines.append(f"FAILED: {len(self.failed_tasks)} tasks could not be sampled (left "
                         f"out; rerun to retry), e.g. {next(iter(self.failed_tasks.values()))}")
        return "\n".join(lines) + (
            f"\nstatus: {status}\n(greedy on {self.tasks} tasks; {self.samples} samples on "
            f"{self.sampled_tasks} of them; {self.resumed_tasks} tasks from an earlier run; "
            f"{self.generated} completions in {_figure(self.seconds)} s = "
            f"{_figure(self.samples_per_s)}/s)")


def _figure(x: float) -> str:
    """A rate or a duration with two significant figures below 10 ('0.046', '4.3'), whole
    above ('434'), so a slow endpoint's rate never reads as 0.0."""
    return f"{x:.0f}" if x >= 10 or x == 0 else f"{x:.2g}"


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


# --- samplers: turn tasks into completions ------------------------------------------------------
class LocalSampler:
    """A transformers model on this machine, through the trainer's shared-prefix sampler: each
    prompt is prefilled once for its n samples (a prefix common to a call's prompts once) and
    finished rows leave the batch; batch_size // n tasks per call.

    `continuous`: one batch of up to `batch_size` rows kept full across tasks instead
    (trainer/sampling/batching.py: finished rows are refilled with the next tasks' samples), four
    batches' worth of tasks per call. Either way each task samples from its own generator, so
    its samples do not depend on the other tasks up to float rounding: the packed decode step
    (and, on several threads, the model's forward) rounds a row's logits differently with the
    batch's shapes, which rarely flips a draw and the rest of that task's completions.
    `draw`: how tokens are drawn (trainer/sampling/draws.py). Evaluation's default is the
    inverse CDF, one uniform per row: the same law as the trainer's `torch.multinomial` at a
    fraction of its cost, a different random stream (so not the trainer's samples)."""

    def __init__(self, model, tokenizer, batch_size: int = 64, continuous: bool = False,
                 draw: str = "inverse_cdf"):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.continuous, self.draw = continuous, draw

    def tasks_per_call(self, n: int) -> int:
        return max(1, (4 if self.continuous else 1) * self.batch_size // max(n, 1))

    def sample(self, tasks, n: int, seeds: list[int] | None, *, max_tokens: int,
               temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False) -> list[list]:
        """n completions per task (lists of Completion), in task order."""
        from rlvr.trainer.sampling.batching import sample_refilling
        from rlvr.trainer.sampling.rollout import encode_prompt, eos_ids, generate, to_completion
        tok = self.tokenizer
        if not self.continuous:
            r = generate(self.model, tok, tasks, n, max_tokens, temperature, top_p, greedy,
                         share_prefix=True, seeds=None if greedy else seeds, draw=self.draw)
            return [r.completions[i * n:(i + 1) * n] for i in range(len(tasks))]
        eos = eos_ids(tok, self.model)
        prompts = [encode_prompt(tok, t.prompt, t.metadata.get("tools")) for t in tasks]
        seqs = sample_refilling(self.model, prompts, n, max_tokens, eos, tok.pad_token_id,
                                temperature, top_p, greedy, None if greedy else seeds,
                                max_rows=self.batch_size, draw=self.draw)
        done = [to_completion(tok, s, eos, max_tokens) for s in seqs]
        return [done[i * n:(i + 1) * n] for i in range(len(tasks))]


# --- the evaluation ----------------------------------------------------------------------------
def _score_tasks(env, tasks, sampled, greedy, seeds, n) -> list[TaskRecord]:
    """Score every completion of a chunk of tasks in one batch; one record per task."""
    flat_tasks, flat = [], []
    for i, task in enumerate(tasks):
        for c in (greedy[i] if greedy else []) + (sampled[i] if sampled else []):
            flat_tasks.append(task)
            flat.append(c)
    verdicts = env.reward.score_batch(flat_tasks, flat) if flat else []
    out, pos = [], 0
    for i, task in enumerate(tasks):
        g = 1 if greedy else 0
        s = len(sampled[i]) if sampled else 0
        rows = list(zip(flat[pos:pos + g + s], verdicts[pos:pos + g + s]))
        pos += g + s
        out.append(TaskRecord.from_scored(task, seeds[i], rows[:g], rows[g:], env.parser,
                                          Verdict.solved.fget))
    return out


def evaluate(sampler, env, cfg: EvalConfig, store: SampleStore | None = None,
             progress: bool = True) -> EvalResult:
    """Sample cfg.n completions (and one greedy) for each of cfg.tasks held-out tasks, score
    them, and estimate pass@k. `sampler` is a LocalSampler, an EndpointSampler, or a
    (model, tokenizer) pair; `store` makes the run resumable."""
    from tqdm.auto import tqdm
    if isinstance(sampler, tuple):
        sampler = LocalSampler(*sampler, batch_size=cfg.batch_size,
                               continuous=cfg.continuous_batching)
    t0 = time.perf_counter()
    tasks = distinct_tasks(env, cfg.split, cfg.tasks, cfg.seed)
    seeds = task_seeds(cfg.seed, [t.id for t in tasks])
    n_for = lambda index: cfg.n if index < (cfg.sample_tasks or len(tasks)) else 0
    done = store.finished() if store else {}
    todo = [i for i, t in enumerate(tasks) if t.id not in done]
    records = dict(done)
    generated, failed = 0, {}
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc="rlvr eval", unit="task",
               disable=not progress, dynamic_ncols=True)
    per_call = sampler.tasks_per_call(cfg.n)
    try:
        for start in range(0, len(todo), per_call):
            idx = todo[start:start + per_call]
            chunk, chunk_seeds = [tasks[i] for i in idx], [seeds[i] for i in idx]
            kw = dict(max_tokens=cfg.max_completion_length)
            greedy = sampler.sample(chunk, 1, None, greedy=True, **kw) if cfg.greedy else None
            want = [i for i in idx if n_for(i)]
            sampled = [[] for _ in idx]
            if want:
                got = sampler.sample([tasks[i] for i in want], cfg.n, [seeds[i] for i in want],
                                     temperature=cfg.temperature, top_p=cfg.top_p, **kw)
                for i, comps in zip(want, got):
                    sampled[idx.index(i)] = comps
            keep = []
            for j, task in enumerate(chunk):      # a sampler failure is not a wrong answer
                err = next((x for x in (greedy[j] if greedy else None, sampled[j])
                            if isinstance(x, Exception)), None)
                if err is None:
                    keep.append(j)
                else:
                    failed[task.id] = str(err)
            pick = lambda xs: None if xs is None else [xs[j] for j in keep]
            new = _score_tasks(env, pick(chunk), pick(sampled), pick(greedy),
                               pick(chunk_seeds), cfg.n)
            generated += sum(len(r.samples) + len(r.greedy) for r in new)
            for rec in new:
                records[rec.id] = rec
                if store:
                    store.write(rec)
            bar.update(len(chunk))
            _postfix(bar, [records[t.id] for t in tasks if t.id in records])
    finally:
        bar.close()
    ordered = [records[t.id] for t in tasks if t.id in records]
    result = _result(ordered, cfg, time.perf_counter() - t0, generated,
                     sum(t.id in done for t in tasks))
    result.failed_tasks = failed
    prints = {t.id: task_fingerprint(t) for t in tasks}
    result.task_fingerprints = [prints[i] for i in result.task_ids]
    return result


def _postfix(bar, recs) -> None:
    greedy = [r.greedy_correct for r in recs if r.greedy]
    sampled = [r for r in recs if r.samples]
    post = {}
    if greedy:
        post["greedy"] = f"{sum(greedy) / len(greedy):.3f}"
    if sampled:
        post["pass@1"] = f"{sum(r.correct / len(r.samples) for r in sampled) / len(sampled):.3f}"
    bar.set_postfix(post, refresh=False)


def _result(recs: list[TaskRecord], cfg: EvalConfig, seconds: float, generated: int,
            resumed: int) -> EvalResult:
    sampled = [r for r in recs if r.samples]
    counts = [r.correct for r in sampled]
    ks = [k for k in cfg.ks if k <= cfg.n]
    curve = pass_at_k_curve(counts, cfg.n, ks, cfg.bootstrap, cfg.level, cfg.seed) if counts \
        else None
    greedy, greedy_ci = None, None
    if cfg.greedy and recs:     # none when every task failed to sample
        g = pass_at_k_curve([int(r.greedy_correct) for r in recs], 1, [1], cfg.bootstrap,
                            cfg.level, cfg.seed)
        greedy, greedy_ci = g.value[0], (g.low[0], g.high[0])
    statuses: dict[str, int] = {}
    lengths, well_formed, rows = [], 0, 0
    for r in recs:
        for s in r.samples:
            statuses[s["status"]] = statuses.get(s["status"], 0) + 1
            if s.get("tokens") is not None:
                lengths.append(s["tokens"])
            well_formed += bool(s.get("well_formed"))
            rows += 1
    return EvalResult(
        pass_at=dict(zip(curve.ks, curve.value)) if curve else {},
        pass_at_ci={k: (lo, hi) for k, lo, hi in zip(curve.ks, curve.low, curve.high)} if curve
        else {},
        greedy_pass1=greedy, greedy_pass1_ci=greedy_ci, tasks=len(recs),
        sampled_tasks=len(sampled), samples=cfg.n, correct_counts=counts,
        task_ids=[r.id for r in sampled], statuses=statuses,
        mean_length=sum(lengths) / len(lengths) if lengths else None,
        well_formed_rate=well_formed / max(rows, 1),
        seconds=seconds, generated=generated, resumed_tasks=resumed, level=cfg.level,
        label=cfg.label)


# --- models ------------------------------------------------------------------------------------
def resolve_model(name: str) -> str:
    """A model name as the trainer resolves it ('smollm2', a run directory's latest policy,
    trainer/models/loading.py), imported when called so that this module loads without torch."""
    from rlvr.trainer.models.loading import resolve_model as resolve
    return resolve(name)


def default_label(cfg: EvalConfig, path: str) -> str:
    if cfg.label:
        return cfg.label
    fmt = "" if cfg.dtype == "float32" else f" ({cfg.dtype})"     # another distribution
    if cfg.model == "smollm2":
        return "SmolLM2-135M-Instruct" + fmt
    p = Path(path)
    if p.name == "policy" and p.parent.parent.name == "checkpoints":
        return f"{p.parent.parent.parent.name} ({p.parent.name})" + fmt
    return (p.name or cfg.model) + fmt


def _sampler(cfg: EvalConfig):
    """The sampler and the model's identity for the results."""
    if cfg.endpoint:
        from rlvr.trainer.evaluation.endpoint import EndpointConfig, EndpointSampler
        ep = EndpointConfig(url=cfg.endpoint, model=cfg.model, api_key_env=cfg.api_key_env,
                            concurrency=cfg.concurrency, retries=cfg.retries,
                            timeout_s=cfg.request_timeout_s, n_per_request=cfg.n_per_request)
        label = cfg.label or f"{cfg.model} @ {cfg.endpoint}"
        return EndpointSampler(ep), {"endpoint": cfg.endpoint, "name": cfg.model, "label": label}
    import torch

    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    path = resolve_model(cfg.model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_policy(path, cfg.dtype, device)
    identity = {"path": path, "name": cfg.model, "label": default_label(cfg, path)}
    if cfg.dtype != "float32":
        identity["dtype"] = cfg.dtype
    if cfg.tokenizer:
        identity["tokenizer"] = resolve_model(cfg.tokenizer)
    return LocalSampler(model, load_tokenizer(identity.get("tokenizer", path)), cfg.batch_size,
                        cfg.continuous_batching), identity


def samples_path(out: str | Path) -> Path:
    """Where the per-sample rows of results file `out` go: OUT.samples.jsonl beside it."""
    out = Path(out)
    return out.with_name(out.stem + ".samples.jsonl")


def _run_env(folder: str) -> tuple[str, dict] | None:
    """(env, env_kwargs) an rlvr run folder trained on, from its config.json; None for anything
    else (a model folder, a hub id, a run without an environment such as SFT)."""
    path = Path(folder) / "config.json"
    if not (Path(folder) / "checkpoints").is_dir() or not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text()).get("config", {})
    except (json.JSONDecodeError, AttributeError):
        return None
    # `env_args` since the run harness; runs written before it say `env_kwargs`
    args = saved.get("env_args", saved.get("env_kwargs")) or {}
    return (saved["env"], dict(args)) if saved.get("env") else None


def resolve_env(cfg: EvalConfig) -> str:
    """Fill in `cfg.env` and `cfg.env_kwargs` (in place) and say where they came from: the run
    folder's own environment and arguments (`env_from`, or `model` when it is a run folder),
    each argument given in `cfg` replacing the run's; a different `env` replaces the run's
    altogether. Calling it again changes nothing."""
    folder = cfg.env_from or ("" if cfg.endpoint else cfg.model)
    run = _run_env(folder) if folder else None
    if cfg.env_from and run is None:
        raise ValueError(f"env_from {cfg.env_from!r} is not an rlvr run folder with an "
                         "environment (its config.json names none)")
    given = ", ".join(f"{k}={v!r}" for k, v in cfg.env_kwargs.items())
    if run is None or (cfg.env and cfg.env != run[0]):
        cfg.env = cfg.env or DEFAULT_ENV
        why = f"the run {folder}'s is {run[0]}, replaced by --env" if run else "as given"
        return f"environment: {cfg.env} {cfg.env_kwargs or '{}'} ({why})"
    cfg.env, cfg.env_kwargs = run[0], {**run[1], **cfg.env_kwargs}
    return (f"environment: {cfg.env} {cfg.env_kwargs} (the tasks the run {folder} trained on"
            + (f"; given: {given})" if given else ")"))


def run_eval(cfg: EvalConfig, out: str | Path | None = None, progress: bool = True,
             announce=None) -> EvalResult:
    """Load the environment (`resolve_env`) and model named in `cfg`, evaluate (resuming
    OUT.samples.jsonl if it exists), and write the results JSON to `out`. `announce(line)`
    is told which environment was used, once everything has loaded (before sampling)."""
    import rlvr
    which = resolve_env(cfg)
    env = rlvr.load_env(cfg.env, **cfg.env_kwargs)
    if cfg.split not in env.source.splits:
        raise ValueError(f"environment {cfg.env!r} has no split {cfg.split!r}; "
                         f"it has {list(env.source.splits)}")
    store = None
    if out is not None:
        store = SampleStore(samples_path(out), cfg.identity())   # refuses other settings first
    sampler, model = _sampler(cfg)
    if announce is not None:
        announce(which)
    if not cfg.label:
        cfg.label = model["label"]
    try:
        result = evaluate(sampler, env, cfg, store, progress)
    finally:
        if hasattr(sampler, "close"):
            sampler.close()
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(
            {"format": "rlvr-eval/1", "config": asdict(cfg), "model": model,
             "model_path": model.get("path"),
             "env": {**env.describe(), "registered_as": cfg.env, "arguments": cfg.env_kwargs},
             "samples_file": str(samples_path(out)), "bootstrap": cfg.bootstrap,
             "complete": not result.failed_tasks,
             **result.to_dict()}, indent=1))
    return result


# --- inside training ---------------------------------------------------------------------------
def evaluate_in_training(env, engine, cfg, step: int, dist) -> dict:
    """The Trainer's periodic eval: greedy pass@1 and pass@k (k = cfg.eval_k samples at the
    training temperature) on `cfg.eval_tasks` test tasks. Sampling is seeded per task from
    (seed, step), so evaluating never changes the training trajectory; under torchrun the
    tasks are shared out and the hits summed."""
    from rlvr.trainer.parallel.distributed import group_seeds, shard
    from rlvr.trainer.sampling.rollout import score
    k = cfg.eval_k
    if "test" not in env.source.splits:
        raise ValueError(f"environment {env.name!r} has no test split for eval")
    every = env.sample(cfg.eval_tasks, split="test", seed=cfg.seed)
    first, stop = shard(len(every), dist, "eval_tasks")
    tasks, n = every[first:stop], len(every)
    greedy = score(env, engine.generate(tasks, 1, cfg.max_completion_length, greedy=True))
    seeds = group_seeds(cfg.seed, step, 0, count=len(tasks), offset=first)  # rounds are 1..; 0 = eval
    sampled = score(env, engine.generate(tasks, k, cfg.max_completion_length,
                                         temperature=cfg.temperature, top_p=cfg.top_p,
                                         seeds=seeds))
    hits = [sum(v.solved for v in sampled.verdicts[i * k:(i + 1) * k]) for i in range(len(tasks))]
    passk, greedy_ok, reward_sum = dist.sum([
        sum(pass_at_k(k, c, k) for c in hits), sum(v.solved for v in greedy.verdicts),
        float(sampled.rewards.sum())])
    # the greedy pass@1 keeps its name; the sampled estimate gets its own (k may be 1)
    return {f"pass@{k}" if k > 1 else "pass@1/sampled": passk / n, "pass@1": greedy_ok / n,
            "mean_reward": reward_sum / (n * k), "tasks": n}
