r"""Learning per wall-clock second: rlvr's GRPO vs TRL's GRPOTrainer on the same task and settings.

    .venv/bin/python benchmarks/learning_vs_trl.py --seeds 0,1,2   # full; ~15 CPU-min a process a seed
    .venv/bin/python benchmarks/learning_vs_trl.py --check         # equivalence checks, ~3 CPU-min
    .venv/bin/python benchmarks/learning_vs_trl.py --check-bench 2 # the same, benchmark's config (~9 GB)
    .venv/bin/python benchmarks/learning_vs_trl.py --check-on-policy 3 --group 4 --tokens 48 --micro-batches 2
    .venv/bin/python benchmarks/learning_vs_trl.py --check-rates shared   # and `hf`: success rates
                                                                        # of 64 x 16 base samples
    .venv/bin/python benchmarks/learning_vs_trl.py --seeds 0 --steps 2 --eval-at 2 --test 20 --out /tmp/smoke
    .venv/bin/python benchmarks/learning_vs_trl.py --summary                # table of what is saved
    .venv/bin/python benchmarks/learning_vs_trl.py --summary --out benchmarks/results/learning_vs_trl/packed \
        --pool benchmarks/results/learning_vs_trl      # + every run pooled, with paired/Welch p-values
    .venv/bin/python benchmarks/learning_vs_trl.py --summary --out benchmarks/results/learning_vs_trl/silent_skip \
        --rlvr-steps 12 --trl-out benchmarks/results/learning_vs_trl/packed \
        benchmarks/results/learning_vs_trl      # rlvr rerun on its own, paired with the TRL runs
    .venv/bin/python benchmarks/learning_vs_trl.py --pin --seeds 0,1,2 --rlvr-steps 12 \
        --rlvr-eval-extra 6,10,12 --out benchmarks/results/learning_vs_trl/pinned   # a core each
    .venv/bin/python benchmarks/learning_vs_trl.py --pin --who rlvr --seeds 3,4,5,6,7,8,9,10 \
        --rlvr-steps 12 --rlvr-eval-extra 6,10,12 --out benchmarks/results/learning_vs_trl/pinned

Task (issue 18, "Side by side with TRL"): two-digit additions a + b (a, b in 10..99), the chat
prompt 'What is a + b? Put the final answer in \boxed{}.' (SmolLM2's chat template, its default
system turn included, generation prompt added), 512 training pairs and 200 held-out pairs (fixed,
disjoint, the same for every seed). Reward: rlvr's MathReward (docs/math.md: the last \boxed{} when
there is one, else the stated final answer) equal to a + b -- one reward object, called by both
trainers (TRL through a reward function), so the two score identical completions identically.
This is the scorer that reproduces the issue's 12% start (the base model's greedy answers: 8 of
the first 60 held-out pairs); a boxed-only check (TRL's `accuracy_reward`, or the last \boxed{}
as an integer) gives the base model 0% -- only 3.5% of its greedy answers use \boxed{} -- and at
T = 1 almost no group with a right answer to learn from.

Settings shared by both (each named in both configs below): SmolLM2-135M-Instruct in float32 on
CPU, 8 prompts x 8 completions x <= 64 tokens per step, one optimizer step per rollout (8
micro-batches of 8, gradients accumulated: the same gradient as one batch, checked; 8 rather than
4 micro-batches because TRL without activation checkpointing peaked above 8 GiB and was killed
for memory on the shared machine), lr 1e-5 constant, AdamW (0.9, 0.999, eps 1e-8, no
weight decay), gradient-norm clip 1.0, T = 1.0 with no top-k / top-p / repetition penalty, beta 0,
group-std advantages (unbiased std, eps 1e-4), token-ratio clip 0.2, token-mean loss over the
whole batch (rlvr `token_mean`, TRL `loss_type="dapo"`), no activation checkpointing. The prompts
of step k are the same in both: TRL's dataset is rlvr's seeded prompt stream in order, unshuffled.
TRL settings that differ from its defaults for this: `lr_scheduler_type="constant"` (default:
linear decay to 0 over max_steps; rlvr has no decay), `gradient_checkpointing=False` (default
True; rlvr's default is off; it only costs time), `bf16=False` (CPU float32 like rlvr).

Each seed runs rlvr and TRL side by side, two processes with one thread each, so the machine's
load hits both alike; with `--pin` each has a core of its own (rlvr core 0, TRL core 1), so a
process's wall time is its CPU time and does not depend on when its neighbour finishes. Each process evaluates its own policy greedily on the 200 held-out pairs at
the `--eval-at` step counts with the same code (`held_out_accuracy`: the policy's weights copied
into a separate eval-mode model, greedy decoding with rlvr's shared-prefix sampler -- tested equal
to transformers' greedy `generate`); evaluation time is excluded from training time. Results are
one JSON per (seed, trainer) under --out, so an interrupted series resumes.

Time to accuracy: the training wall time at which rlvr's held-out accuracy first reaches TRL's
final (step `--steps`) accuracy, linearly interpolated between evaluation points, over TRL's time
for its `--steps` steps. rlvr may run more steps than TRL (`--rlvr-steps`) so that it can get
there if it learns less per step.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "learning_vs_trl"
ENV_NAME = "bench-add2-boxed"
PROMPT = "What is {a} + {b}? Put the final answer in \\boxed{{}}."


# --- the task ---------------------------------------------------------------------------------
def addition_pairs(n_train: int = 512, n_test: int = 200, data_seed: int = 0):
    """Disjoint train/test lists of (a, b), a, b in 10..99; fixed for every training seed."""
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(f"add2/{data_seed}").shuffle(pairs)
    return pairs[:n_train], pairs[n_train:n_train + n_test]


def _register_env() -> None:
    from rlvr.core import Task
    from rlvr.envs.base import Environment, RowSource
    from rlvr.envs.registry import register_env
    from rlvr.verifiers.math import MathReward
    from rlvr.verifiers.parser import ThinkParser

    def make_tasks(split, pairs):
        return [Task(id=f"add2/{split}/{i}", answer=str(a + b),
                     prompt=[{"role": "user", "content": PROMPT.format(a=a, b=b)}])
                for i, (a, b) in enumerate(pairs)]

    @register_env(ENV_NAME, replace=True)
    def add2(n_train: int = 512, n_test: int = 200) -> Environment:
        """Two-digit additions with a \\boxed{} answer (benchmarks/learning_vs_trl.py)."""
        train, test = addition_pairs(n_train, n_test)
        return Environment(name=ENV_NAME, source=RowSource({"train": make_tasks("train", train),
                                                            "test": make_tasks("test", test)}),
                           rewards=[(MathReward(ThinkParser(), symbolic="inline"), 1.0)],
                           gold=lambda t: f"The answer is \\boxed{{{t.answer}}}.")


# --- the shared evaluation ----------------------------------------------------------------------
class HeldOut:
    """Greedy accuracy on the held-out pairs, the same code for both trainers: the policy's
    weights are copied into one eval-mode model (so neither trainer's training-mode state, KV
    cache settings or checkpointing wrappers touch decoding)."""

    def __init__(self, model_path: str, env, n_test: int, tokens: int):
        from transformers import AutoModelForCausalLM, AutoTokenizer
        self.env, self.tokens = env, tokens
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path).eval()
        self.tasks = env.sample(n_test, "test")

    def __call__(self, policy) -> dict:
        import torch
        from rlvr.trainer.sampling.rollout import generate, score
        t0 = time.perf_counter()
        with torch.no_grad():
            self.model.load_state_dict(policy.state_dict())
        r = score(self.env, generate(self.model, self.tokenizer, self.tasks, 1, self.tokens,
                                     greedy=True, share_prefix=True))
        from rlvr.verifiers.parser import last_boxed
        right = sum(v.solved for v in r.verdicts)
        boxed = sum(last_boxed(c.text) is not None for c in r.completions)
        return {"accuracy": right / len(self.tasks), "right": right,
                "boxed_rate": boxed / len(self.tasks),
                "eval_s": time.perf_counter() - t0}


def rlvr_config(a, steps: int, output_dir: str):
    """rlvr's side of the shared settings (the module docstring), from the command line's `a`."""
    from rlvr.trainer import TrainConfig
    return TrainConfig.from_preset(
        "grpo", model=a.model, env=ENV_NAME, env_kwargs={"n_test": a.test}, seed=a.seed,
        steps=steps, prompts_per_step=a.prompts, group_size=a.group,
        max_completion_length=a.tokens, temperature=1.0, top_p=1.0, lr=a.lr, beta=0.0,
        scale_rewards="group", loss_aggregation="token_mean", clip_eps_low=0.2, clip_eps_high=0.2,
        inner_steps=1, micro_batch_size=a.prompts * a.group // a.micro_batches, max_grad_norm=1.0,
        weight_decay=0.0, adam_betas=(0.9, 0.999), warmup_steps=0, reward_deadline_s=0,
        output_dir=output_dir, checkpoint_every=0, tensorboard=False, progress=False,
        log_completions=0)


def trl_config(a, steps: int, output_dir: str):
    """TRL's side of the same settings: GRPOConfig with every difference from rlvr turned off."""
    from trl import GRPOConfig
    n = a.prompts * a.group
    return GRPOConfig(
        output_dir=output_dir, use_cpu=True, bf16=False,
        seed=a.seed, shuffle_dataset=False, max_steps=steps, learning_rate=a.lr,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, adam_beta1=0.9,
        adam_beta2=0.999, adam_epsilon=1e-8, max_grad_norm=1.0, gradient_checkpointing=False,
        num_generations=a.group, generation_batch_size=n, per_device_train_batch_size=n // a.micro_batches,
        gradient_accumulation_steps=a.micro_batches, num_iterations=1, max_completion_length=a.tokens,
        temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0, beta=0.0, epsilon=0.2,
        loss_type="dapo", scale_rewards="group", mask_truncated_completions=False,
        logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True)


# --- one trainer, one seed (a child process) --------------------------------------------------
def run_rlvr(a, env, held_out) -> dict:
    from rlvr.trainer import Trainer
    cfg = rlvr_config(a, a.rlvr_steps, f"/tmp/rlvr-bench/learning-rlvr-{a.seed}")
    tr = Trainer(cfg)
    drawn, take = [], tr.stream.take
    tr.stream.take = lambda n: drawn.append(take(n)) or drawn[-1]    # record each step's prompts
    curve, steps, train_s, train_cpu = [], [], 0.0, 0.0
    evals = sorted(set(a.eval_at) | set(a.rlvr_eval_extra))
    for k in range(1, cfg.steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        m, _ = tr.train_step()
        tr.step += 1
        train_s += time.perf_counter() - t0
        train_cpu += time.process_time() - c0
        steps.append({"step": k, "train_s": train_s, "train_cpu_s": train_cpu, "reward": m["reward"],
                      "prompts": sorted({t.id for t in drawn[-1]}),
                      "grad_norm": m["grad_norm"], "loss": m["loss"]})
        if k in evals:
            curve.append({"step": k, "train_s": train_s, "train_cpu_s": train_cpu,
                          **held_out(tr.policy)})
            print(f"rlvr seed {a.seed} step {k}: {curve[-1]}", file=sys.stderr, flush=True)
    return {"curve": curve, "steps": steps, "prompt_order": [t.id for t in _stream(env, a)]}


def _stream(env, a):
    """The prompts rlvr's trainer draws, in order (its seeded PromptStream)."""
    from rlvr.trainer.sampling.rollout import PromptStream
    return PromptStream(env, a.seed).take(a.prompts * max(a.steps, a.rlvr_steps))


def run_trl(a, env, held_out) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer
    from rlvr.core import Completion
    order = _stream(env, a)[:a.prompts * a.steps]
    ds = Dataset.from_list([{"prompt": t.prompt, "task_id": t.id} for t in order])
    seen, rewards = [], []

    def env_reward(completions, task_id, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        verdicts = env.reward.score_batch([env.get_task(i) for i in task_id],
                                          [Completion(t) for t in texts])
        seen.append(sorted(set(task_id)))
        scores = [v.score for v in verdicts]
        rewards.append(sum(scores) / len(scores))
        return scores

    clock = {"start": None, "cpu0": None, "eval_s": 0.0, "eval_cpu": 0.0}
    curve, steps = [], []

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            clock["start"], clock["cpu0"] = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, model=None, **kw):
            k = state.global_step
            train_s = time.perf_counter() - clock["start"] - clock["eval_s"]
            train_cpu = time.process_time() - clock["cpu0"] - clock["eval_cpu"]
            steps.append({"step": k, "train_s": train_s, "train_cpu_s": train_cpu,
                          "reward": rewards[-1] if rewards else None})
            if k in a.eval_at:
                t0, c0 = time.perf_counter(), time.process_time()
                curve.append({"step": k, "train_s": train_s, "train_cpu_s": train_cpu,
                              **held_out(model)})
                model.train()
                clock["eval_s"] += time.perf_counter() - t0
                clock["eval_cpu"] += time.process_time() - c0
                print(f"trl seed {a.seed} step {k}: {curve[-1]}", file=sys.stderr, flush=True)

    cfg = trl_config(a, a.steps, f"/tmp/rlvr-bench/learning-trl-{a.seed}")
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model)
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward, args=cfg, train_dataset=ds,
                          processing_class=tok, callbacks=[Clock()])
    trainer.train()
    for s, ids in zip(steps, seen):
        s["prompts"] = ids
    return {"curve": curve, "steps": steps, "prompt_order": [t.id for t in order]}


def child(a) -> None:
    if a.core >= 0:                     # --pin: this core alone, before torch starts its threads
        os.sched_setaffinity(0, {a.core})
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    import rlvr
    _register_env()
    env = rlvr.load_env(ENV_NAME, n_test=a.test)
    held_out = HeldOut(a.model, env, a.test, a.tokens)
    if a.run == "base":      # step 0: the same base model for every seed and both trainers
        from transformers import AutoModelForCausalLM
        print("RESULT " + json.dumps(held_out(AutoModelForCausalLM.from_pretrained(a.model))))
        return
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    out = {"rlvr": run_rlvr, "trl": run_trl}[a.run](a, env, held_out)
    out.update(who=a.run, seed=a.seed, process_s=time.perf_counter() - t0,
               cpu_s=time.process_time(), load_start=load0, load_end=os.getloadavg()[0],
               date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    path = a.out / f"seed{a.seed}-{a.run}.json"     # written by the run itself: resumable
    path.with_suffix(".tmp").write_text(json.dumps(out, indent=1))
    path.with_suffix(".tmp").rename(path)


# --- the equivalence checks (--check): cheap, one small rollout each ----------------------------
def weight_gap(ours: dict, theirs: dict, start: dict) -> str:
    """The two trainers' weight changes from `start` (state dicts), compared tensor by tensor in
    float64: their norms, the norm of their difference relative to TRL's, and their cosine."""
    dot = na = nb = nd = 0.0
    for k, w in theirs.items():
        x, y = (ours[k] - start[k]).double().flatten(), (w.detach() - start[k]).double().flatten()
        dot, na, nb, nd = dot + float(x @ y), na + float(x @ x), nb + float(y @ y), nd + float((x - y) @ (x - y))
    return f"weight change rlvr {na ** .5:.6g} TRL {nb ** .5:.6g}" + (
        f", relative difference {(nd / nb) ** .5:.2e}, cosine {dot / (na * nb) ** .5:.6f}"
        if na and nb else "")


def train_on_rollouts(trainer, rollouts) -> list[float]:
    """Run TRL's `trainer` with rlvr's rollouts in place of its generation, one per step (the
    prompts it rendered must be the rollout's); its grad norm per step."""
    queue = iter(rollouts)

    def replay(prompt_ids, *args, **kw):
        rollout = next(queue)
        assert [list(p) for p in prompt_ids] == rollout.prompt_ids, "TRL rendered other prompt ids"
        return [list(c) for c in rollout.completion_ids], None
    trainer._generate_single_turn = replay
    trainer.train()
    return [h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h]


def check_steps(model_path: str, steps: int = 3) -> str:
    """`steps` whole optimizer steps on the same rollouts: rlvr's Trainer samples and updates;
    TRL's GRPOTrainer gets those completions and rewards in its place (its generation
    replaced). The weights must agree after every step -- which also checks what carries over
    between steps (AdamW's moments and step count, the LR schedule)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    from rlvr.trainer import TrainConfig, Trainer
    P, G = 2, 4
    patterns = [[1., 0., 0., 1., 0., 1., 0., 0.], [0., 0., 1., 0., 0., 0., 0., 0.],
                [0., 0., 0., 0., 0., 0., 0., 0.], [1., 1., 0., 1., 0., 1., 1., 0.]]
    rewards = [patterns[k % len(patterns)] for k in range(steps)]   # step 3: no signal at all
    tr = Trainer(TrainConfig.from_preset(
        "grpo", model=model_path, env=ENV_NAME, seed=3, steps=steps, prompts_per_step=P,
        group_size=G, max_completion_length=32, lr=1e-5, beta=0.0, loss_aggregation="token_mean",
        micro_batch_size=G, reward_deadline_s=0, output_dir="/tmp/rlvr-bench/check-rlvr",
        checkpoint_every=0, tensorboard=False, progress=False))
    w0 = {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}
    rollouts, ours, w_rlvr = [], [], []
    for k in range(steps):
        rollout, _ = tr.collect()
        rollout.rewards = torch.tensor(rewards[k])
        ours.append(tr.update(tr.prepare(rollout), first=True)["grad_norm"])
        tr.step += 1
        rollouts.append(rollout)
        w_rlvr.append({k2: v.detach().clone() for k2, v in tr.policy.state_dict().items()})
    fixed = iter(x for r in rewards for x in r)
    cfg = GRPOConfig(output_dir="/tmp/rlvr-bench/check-trl", use_cpu=True, bf16=False,
                     shuffle_dataset=False, max_steps=steps, learning_rate=1e-5,
                     lr_scheduler_type="constant", gradient_checkpointing=False, num_generations=G,
                     generation_batch_size=P * G, per_device_train_batch_size=G,
                     gradient_accumulation_steps=P, max_completion_length=32, beta=0.0,
                     loss_type="dapo", logging_steps=1, report_to="none", save_strategy="no",
                     disable_tqdm=True)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    gaps = []

    class Compare(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            gaps.append(weight_gap(w_rlvr[state.global_step - 1], model.state_dict(), w0))

    prompts = [{"prompt": t.prompt} for r in rollouts for t in r.tasks[::G]]
    t = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [next(fixed) for _ in completions],
                    args=cfg, processing_class=AutoTokenizer.from_pretrained(model_path),
                    train_dataset=Dataset.from_list(prompts), callbacks=[Compare()])
    norms = train_on_rollouts(t, rollouts)
    lines = [f"step {k + 1} (rewards {sum(rewards[k]):.0f}/{len(rewards[k])}): grad norm "
             f"rlvr {ours[k]:.6g} TRL {norms[k]:.6g}; {gap}" for k, gap in enumerate(gaps)]
    return "same rollouts, step by step:\n  " + "\n  ".join(lines)


def check_steps_bench(a, steps: int = 2) -> str:
    """`check_steps` in the benchmark's own configuration (`rlvr_config` / `trl_config`: 8 x 8,
    <= 64 tokens, 8 micro-batches, seed `a.seed`) with the environment's rewards: rlvr's
    `Trainer.train_step()` samples, scores and updates; TRL's GRPOTrainer gets those completions in
    place of its generation and scores its own decoded texts with the same reward object. The
    rewards must agree, and the weights after every step."""
    import gc
    import rlvr
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer
    from rlvr.core import Completion
    from rlvr.trainer import Trainer
    env = rlvr.load_env(ENV_NAME, n_test=a.test)
    tr = Trainer(rlvr_config(a, steps, "/tmp/rlvr-bench/check-bench-rlvr"))
    w0 = {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}
    rollouts, ours, sample = [], [], tr.collect

    def collect():                      # keep each step's rollout for TRL
        rollout, metrics = sample()
        rollouts.append(rollout)
        return rollout, metrics
    tr.collect = collect
    for _ in range(steps):
        m, _ = tr.train_step()
        tr.step += 1
        ours.append((m["grad_norm"], {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}))
    tr = sample = None                  # rlvr's trainer freed before TRL's is built (memory)
    gc.collect()
    model, lines, agree = AutoModelForCausalLM.from_pretrained(a.model), [], []

    class Compare(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            lines.append(weight_gap(ours[state.global_step - 1][1], model.state_dict(), w0))

    def reward(completions, task_id, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        scores = [v.score for v in env.reward.score_batch([env.get_task(i) for i in task_id],
                                                            [Completion(t) for t in texts])]
        agree.append(scores == rollouts[len(agree)].rewards.tolist())
        return scores

    prompts = [{"prompt": t.prompt, "task_id": t.id} for r in rollouts for t in r.tasks[::a.group]]
    t = GRPOTrainer(model=model, reward_funcs=reward, args=trl_config(a, steps, "/tmp/rlvr-bench/check-bench-trl"),
                    processing_class=AutoTokenizer.from_pretrained(a.model),
                    train_dataset=Dataset.from_list(prompts), callbacks=[Compare()])
    norms = train_on_rollouts(t, rollouts)
    return "benchmark configuration, same rollouts, step by step:\n  " + "\n  ".join(
        f"step {k + 1} (rewards {float(r.rewards.sum()):.0f}/{len(r.rewards)}, TRL's own scoring "
        f"{'agrees' if ok else 'DIFFERS'}): grad norm rlvr {g:.6g} TRL {n:.6g}; {line}"
        for k, (r, ok, (g, _), n, line) in enumerate(zip(rollouts, agree, ours, norms, lines)))


class DrawnLogprobs:
    """rlvr's sampler spied on while in a `with` block: the log-probability it gave each token
    it drew, per decoding step; `per_row(seqs)` regroups them by completion (finished rows leave
    the batch in order, so step t's rows are those longer than t)."""

    def __enter__(self):
        import torch
        from rlvr.trainer.sampling import rollout as ro
        self.seen, self._ro, pick = [], ro, ro._pick

        def spy(logits, *args, **kw):
            t = pick(logits, *args, **kw)
            self.seen.append(torch.log_softmax(logits.float(), -1).gather(1, t[:, None]).squeeze(1))
            return t
        self._pick, ro._pick = pick, spy
        return self

    def __exit__(self, *exc):
        self._ro._pick = self._pick

    def per_row(self, seqs: list[list[int]]) -> list[list[float]]:
        own = [[] for _ in seqs]
        for t, lp in enumerate(self.seen):
            for i, r in enumerate([r for r, q in enumerate(seqs) if len(q) > t]):
                own[r].append(float(lp[i]))
        self.seen = []
        return own


def check_on_policy(a, steps: int = 3) -> str:
    """Inside rlvr's Trainer (its engine, precision and heap-reuse contexts), step after step: the
    sampler's log-probability of every token it drew against the training forward of the current
    policy. `check_sampler_logits` covers the sampler called directly on the base model; this
    covers the trainer's path after updates."""
    import torch
    from rlvr.trainer import Trainer
    from rlvr.trainer.forwards.fast import completion_logprobs, pack
    tr = Trainer(rlvr_config(a, steps, "/tmp/rlvr-bench/check-on-policy"))
    sample, lines = tr.collect, []
    with DrawnLogprobs() as drawn:
        for k in range(steps):
            rollout, metrics = sample()
            seqs, G = rollout.completion_ids, a.group
            own = drawn.per_row(seqs)
            diffs = []
            with torch.no_grad():
                for g in range(len(seqs) // G):
                    rows = list(range(g * G, g * G + G))
                    mb = pack([rows], rollout.prompt_ids, seqs, tr.tokenizer.pad_token_id, "cpu", True)
                    lp, _ = completion_logprobs(tr.policy, mb, 1.0)
                    diffs += [torch.tensor(own[r]) - lp[i, :len(seqs[r])] for i, r in enumerate(rows)]
            d = torch.cat(diffs)
            tr.collect = lambda: (rollout, metrics)         # update on the rollout just checked
            m, _ = tr.train_step()
            tr.step += 1
            lines.append(f"step {k + 1} (reward {m['reward']:.3f}, grad norm {m['grad_norm']:.4g}): "
                         f"{d.numel()} tokens, sampler - training log p: max |.| {d.abs().max():.2e}, "
                         f"mean {d.mean():+.2e}")
    return "rlvr's trainer samples on-policy:\n  " + "\n  ".join(lines)


def check_samplers(model_path: str, env) -> str:
    """An unbiased sampler of softmax(logits) has E[-log p(token)] = entropy at each position:
    rlvr's shared-prefix sampler and transformers' generate (what TRL calls), 8 x 8 x <= 48."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from rlvr.trainer.forwards.fast import completion_logprobs, pack
    from rlvr.trainer.sampling.rollout import generate
    tok = AutoTokenizer.from_pretrained(model_path)
    m = AutoModelForCausalLM.from_pretrained(model_path).eval()
    tasks, G, out = env.sample(8, "train"), 8, []
    for share in (True, False):
        r = generate(m, tok, tasks, G, 48, share_prefix=share, seeds=list(range(len(tasks))))
        gaps = []
        with torch.no_grad():
            for g in range(len(tasks)):
                mb = pack([list(range(g * G, g * G + G))], r.prompt_ids, r.completion_ids,
                          tok.pad_token_id, "cpu", True)
                logp, ent = completion_logprobs(m, mb, 1.0, with_entropy=True)
                gaps.append((-logp - ent)[mb.mask])
        x = torch.cat(gaps)
        out.append(f"{'rlvr shared-prefix' if share else 'transformers generate'}: mean(-log p - H) "
                   f"= {x.mean():.3f} +- {x.std() / x.numel() ** 0.5:.3f} over {x.numel()} tokens")
    return "; ".join(out)


def check_sampler_logits(model_path: str, env, prompts: int = 8, G: int = 8,
                         tokens: int = 48) -> str:
    """Each sampler's log-probability of every token it drew, as the sampler computed it,
    against the training forward's (teacher-forced, what the loss differentiates): a sampler
    that decodes with other positions, masks or cache contents than the model is trained
    with draws from another distribution, and the gap shows here token by token. rlvr's
    shared-prefix sampler (its `_pick` sees the logits) and transformers' `generate` with
    TRL's settings (`output_scores`: the raw logits at T = 1, no warpers)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from rlvr.trainer.sampling import rollout as ro
    from rlvr.trainer.forwards.fast import completion_logprobs, pack
    tok = AutoTokenizer.from_pretrained(model_path)
    m = AutoModelForCausalLM.from_pretrained(model_path).eval()
    tasks = env.sample(prompts, "train")
    ids = [ro.encode_prompt(tok, t.prompt) for t in tasks]
    eos = ro.eos_ids(tok, m)

    def training_logp(seqs):
        out = []
        with torch.no_grad():
            for g in range(len(ids)):
                rows = list(range(g * G, g * G + G))
                mb = pack([rows], [ids[r // G] for r in range(len(seqs))], seqs,
                          tok.pad_token_id, "cpu", True)
                lp, _ = completion_logprobs(m, mb, 1.0)
                out += [lp[i, :len(seqs[r])] for i, r in enumerate(rows)]
        return out

    def shared():
        with DrawnLogprobs() as drawn, torch.no_grad():
            seqs = ro.sample_shared_prefix(m, ids, G, tokens, eos, tok.pad_token_id,
                                           seeds=list(range(len(ids))))
        return seqs, drawn.per_row(seqs)

    def hf():
        cfg = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                               max_new_tokens=tokens, num_return_sequences=G,
                               pad_token_id=tok.pad_token_id, eos_token_id=sorted(eos),
                               output_scores=True, return_dict_in_generate=True)
        x, attn = ro.left_pad(ids, tok.pad_token_id, "cpu")
        torch.manual_seed(0)
        with torch.no_grad():
            out = m.generate(input_ids=x, attention_mask=attn, generation_config=cfg)
        gen = out.sequences[:, x.size(1):].tolist()
        seqs, own = [], []
        for r, row in enumerate(gen):
            stop = next((i for i, t in enumerate(row) if t in eos), None)
            seq = row[:stop + 1] if stop is not None else row
            seqs.append(seq)
            own.append([float(torch.log_softmax(out.scores[t][r].float(), -1)[seq[t]])
                        for t in range(len(seq))])
        return seqs, own

    lines = []
    for name, fn in (("rlvr shared-prefix", shared), ("transformers generate", hf)):
        seqs, own = fn()
        diff = torch.cat([torch.tensor(o) - t for o, t in zip(own, training_logp(seqs))])
        lines.append(f"{name}: {diff.numel()} tokens, sampler log p - training log p: "
                     f"max |.| {diff.abs().max():.2e}, mean {diff.mean():+.2e}")
    return "; ".join(lines)


def check_rates(model_path: str, env, sampler: str, prompts: int, per_prompt: int,
                tokens: int, out: Path) -> dict:
    """Success rate of many T = 1 samples from the base model on the first `prompts` training
    prompts: rlvr's shared-prefix sampler ("shared") or transformers' generate ("hf", what
    TRL calls). Two samplers of the same softmax give the same rate up to binomial noise; a
    sampler that learns less per step would show here, where both start from one model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from rlvr.trainer.sampling.rollout import generate, score
    tok = AutoTokenizer.from_pretrained(model_path)
    m = AutoModelForCausalLM.from_pretrained(model_path).eval()
    tasks = env.sample(prompts, "train")
    t0, right, lengths, stopped = time.perf_counter(), [], [], 0
    for i in range(0, len(tasks), 8):          # 8 prompts x per_prompt rows per generate call
        chunk = tasks[i:i + 8]
        r = score(env, generate(m, tok, chunk, per_prompt, tokens, temperature=1.0,
                                share_prefix=sampler == "shared",
                                seeds=[1000 + i + j for j in range(len(chunk))]))
        right += [int(v.solved) for v in r.verdicts]
        lengths += [len(c) for c in r.completion_ids]
        stopped += sum(c.finish_reason == "stop" for c in r.completions)
    res = {"sampler": sampler, "samples": len(right), "right": sum(right),
           "rate": sum(right) / len(right), "mean_length": sum(lengths) / len(lengths),
           "stopped": stopped, "seconds": time.perf_counter() - t0,
           "per_prompt_right": [sum(right[k:k + per_prompt]) for k in range(0, len(right), per_prompt)]}
    out.write_text(json.dumps(res) + "\n")
    return res


# --- the parent: seed pairs side by side, then the summary ----------------------------------
def run_pair(a, seed: int) -> None:
    """rlvr and TRL (those in --who) on one seed, at the same time, one thread each (--pin: each
    on a core of its own)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "TOKENIZERS_PARALLELISM": "false"}
    procs = []
    for who in a.who:
        if not (a.out / f"seed{seed}-{who}.json").exists():
            log = open(a.out / f"seed{seed}-{who}.log", "w")
            core = {"rlvr": 0, "trl": 1}[who] if a.pin else -1
            procs.append((who, subprocess.Popen(_child_cmd(a, who, seed, core), stdout=log,
                                                stderr=subprocess.STDOUT, env=env)))
    for who, proc in procs:
        if proc.wait() or not (a.out / f"seed{seed}-{who}.json").exists():
            raise SystemExit(f"{who} seed {seed} failed (rc {proc.returncode}); "
                             f"see {a.out / f'seed{seed}-{who}.log'}")
    if procs:
        print(f"seed {seed} done; load {os.getloadavg()}", flush=True)


def _child_cmd(a, who: str, seed: int, core: int = -1) -> list[str]:
    return [sys.executable, __file__, "--run", who, "--seed", str(seed), "--model", a.model,
            "--steps", str(a.steps), "--rlvr-steps", str(a.rlvr_steps),
            "--eval-at", ",".join(map(str, a.eval_at)),
            "--rlvr-eval-extra", ",".join(map(str, a.rlvr_eval_extra)),
            "--test", str(a.test), "--prompts", str(a.prompts), "--group", str(a.group),
            "--tokens", str(a.tokens), "--lr", str(a.lr), "--threads", str(a.threads),
            "--micro-batches", str(a.micro_batches), "--core", str(core),
            "--out", str(a.out)]


def base_accuracy(a) -> None:
    """Step 0 (the untrained model), evaluated once: it is the same for every seed and both."""
    path = a.out / "base.json"
    if path.exists():
        return
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(_child_cmd(a, "base", 0), capture_output=True, text=True, env=env)
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if proc.returncode or not line:
        raise SystemExit(f"base evaluation failed: {proc.stderr[-2000:]}")
    path.write_text(line[-1][7:])
    print(f"step 0 (base model): {line[-1][7:]}", flush=True)


def time_to(curve: list[dict], target: float, key: str = "train_s") -> float | None:
    """Training seconds (`key`: wall, or CPU with 'train_cpu_s') at which the accuracy curve
    first reaches `target` (linear between evaluation points), None if it never does."""
    prev = None
    for p in curve:
        if p["accuracy"] >= target:
            if prev is None or p["accuracy"] == prev["accuracy"]:
                return p[key]
            f = (target - prev["accuracy"]) / (p["accuracy"] - prev["accuracy"])
            return prev[key] + f * (p[key] - prev[key])
        prev = p
    return None


def _at(curve, step):
    return next((p for p in curve if p["step"] == step), None)


def summary(a) -> None:
    pairs = {}
    for who, folders in (("rlvr", [a.out]), ("trl", a.trl_out or [a.out])):
        for folder in reversed(folders):            # the first folder holding a seed's run wins
            for path in sorted(folder.glob(f"seed*-{who}.json")):
                r = json.loads(path.read_text())
                pairs.setdefault(r["seed"], {})[who] = r
    done = {s: p for s, p in sorted(pairs.items()) if len(p) == 2}
    if not done:
        print("no finished seed pair under", a.out)
        return
    base = a.out / "base.json"
    if base.exists():
        step0 = {"step": 0, "train_s": 0.0, "train_cpu_s": 0.0, **json.loads(base.read_text())}
        for p in done.values():
            for r in p.values():
                r["curve"] = [step0] + [q for q in r["curve"] if q["step"] != 0]
    steps = sorted({p["step"] for r in done.values() for p in r["trl"]["curve"]})
    print("| seed | who | " + " | ".join(f"acc@{k}" for k in steps) +
          f" | train s @{a.steps} | train CPU s @{a.steps} | reward @{a.steps} | load |")
    print("|---" * (len(steps) + 6) + "|")
    ratios, rows = [], {"rlvr": [], "trl": []}
    for seed, p in done.items():
        for who in ("rlvr", "trl"):
            r = p[who]
            accs = [_at(r["curve"], k) for k in steps]
            last = next(s for s in r["steps"] if s["step"] == a.steps)
            rows[who].append({"acc": {k: x["accuracy"] for k, x in zip(steps, accs) if x},
                              "train_s": last["train_s"], "reward": last["reward"],
                              "train_cpu_s": last.get("train_cpu_s", float("nan"))})
            print(f"| {seed} | {who} | " + " | ".join(f"{x['accuracy']:.1%}" if x else "-" for x in accs)
                  + f" | {last['train_s']:.0f} | {last.get('train_cpu_s', float('nan')):.0f} | "
                  f"{last['reward']:.3f} | {r['load_start']:.1f}-{r['load_end']:.1f} |")
        target = _at(p["trl"]["curve"], a.steps)["accuracy"]
        t_trl = next(s for s in p["trl"]["steps"] if s["step"] == a.steps)["train_s"]
        t_rlvr = time_to(p["rlvr"]["curve"], target)
        ratios.append(None if t_rlvr is None else t_rlvr / t_trl)
        c_trl = next(s for s in p["trl"]["steps"] if s["step"] == a.steps).get("train_cpu_s")
        c_rlvr = time_to(p["rlvr"]["curve"], target, "train_cpu_s") \
            if all("train_cpu_s" in q for q in p["rlvr"]["curve"]) else None
        cpu = f"; CPU {c_rlvr:.0f} s = {c_rlvr / c_trl:.2f}x TRL's {c_trl:.0f} s" \
            if c_rlvr is not None and c_trl else ""
        print(f"|  | seed {seed}: rlvr reaches TRL's {target:.1%} at "
              + (f"{t_rlvr:.0f} s = {t_rlvr / t_trl:.2f}x TRL's {t_trl:.0f} s (wall){cpu} |"
                 if t_rlvr is not None else f"never within {a.rlvr_steps} steps |"))
    print()
    for k in steps:
        both = [(x["acc"][k], y["acc"][k]) for x, y in zip(rows["rlvr"], rows["trl"])
                if k in x["acc"] and k in y["acc"]]
        print(f"acc@{k}: rlvr {_ms([x for x, _ in both])}  TRL {_ms([y for _, y in both])}  "
              f"paired diff rlvr-TRL {_ms([x - y for x, y in both])}")
    for key in ("train_s", "train_cpu_s", "reward"):
        xs = {w: [r[key] for r in rows[w]] for w in rows}
        print(f"{key}@{a.steps}: rlvr {_ms(xs['rlvr'], pct=False)}  TRL {_ms(xs['trl'], pct=False)}")
    def mean_curve(who):     # at the steps every seed evaluated
        common = set.intersection(*({q["step"] for q in p[who]["curve"]} for p in done.values()))
        return [{"step": k, **{f: statistics.mean(_at(p[who]["curve"], k)[f] for p in done.values())
                               for f in ("accuracy", "train_s", "train_cpu_s")}}
                for k in sorted(common)]
    trl_mean, rlvr_mean = mean_curve("trl"), mean_curve("rlvr")
    target = _at(trl_mean, a.steps)["accuracy"]
    print(f"per-seed time-to-accuracy ratios: {[None if x is None else round(x, 2) for x in ratios]}")
    print("mean curves, rlvr: " + ", ".join(f"@{q['step']} {q['accuracy']:.1%} ({q['train_cpu_s']:.0f} "
                                             "CPU s)" for q in rlvr_mean))
    for key, what in (("train_s", "wall"), ("train_cpu_s", "CPU")):
        t_trl = statistics.mean(r[key] for r in rows["trl"])
        t = time_to(rlvr_mean, target, key)
        print(f"mean curves ({what}): rlvr reaches TRL's mean final accuracy {target:.1%} at "
              + (f"{t:.0f} s = {t / t_trl:.2f}x TRL's mean {t_trl:.0f} s (target <= 0.5x)"
                 if t is not None else f"never within {a.rlvr_steps} steps"))


def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b), by its continued fraction (modified Lentz).
    Written out because the benchmark's environment has no scipy."""
    import math
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betai(b, a, 1.0 - x)
    front = math.exp(a * math.log(x) + b * math.log1p(-x) + math.lgamma(a + b)
                     - math.lgamma(a) - math.lgamma(b)) / a
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        num = 1.0 if i == 0 else (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)) if i % 2 == 0
                                  else -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + num / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1.0 - c * d) < 1e-12:
            break
    return front * (f - 1.0)


def t_test_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with `df` degrees of freedom."""
    return _betai(df / 2, 0.5, df / (df + t * t))


def pooled(dirs: list[Path], steps: list[int]) -> None:
    """Every run of the current trainer, pooled over result folders (the first holding a run of
    a (seed, trainer) wins): held-out accuracy per trainer, the paired difference over the seeds
    both ran (paired t) and the unpaired one over all runs (Welch's t)."""
    import math
    runs = {"rlvr": {}, "trl": {}}
    for d in reversed(dirs):
        for path in d.glob("seed*-*.json"):
            r = json.loads(path.read_text())
            runs[r["who"]][r["seed"]] = r
    for k in steps:
        acc = {w: {s: 100 * p["accuracy"] for s, r in rs.items() for p in r["curve"] if p["step"] == k}
               for w, rs in runs.items()}
        x, y = list(acc["rlvr"].values()), list(acc["trl"].values())
        d = [acc["rlvr"][s] - acc["trl"][s] for s in sorted(set(acc["rlvr"]) & set(acc["trl"]))]
        tp = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(len(d)))
        vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
        tw = (statistics.mean(x) - statistics.mean(y)) / math.sqrt(vx + vy)
        dfw = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
        print(f"@{k}: rlvr {statistics.mean(x):.1f} +- {statistics.stdev(x):.1f}% (n={len(x)}), "
              f"TRL {statistics.mean(y):.1f} +- {statistics.stdev(y):.1f}% (n={len(y)}); paired over "
              f"{len(d)} seeds {statistics.mean(d):+.1f} +- {statistics.stdev(d):.1f} points, "
              f"p = {t_test_p(tp, len(d) - 1):.3f}, rlvr lower in {sum(v < 0 for v in d)}; unpaired "
              f"{statistics.mean(x) - statistics.mean(y):+.1f}, Welch p = {t_test_p(tw, dfw):.3f}")
    first = {w: sum(round(64 * r["steps"][0]["reward"]) for r in rs.values()) for w, rs in runs.items()}
    print("step 1 (the same model, the same prompts): right answers " + ", ".join(
        f"{w} {first[w]} of {64 * len(runs[w])}" for w in runs))


def _ms(xs, pct=True) -> str:
    if not xs:
        return "-"
    m = statistics.mean(xs)
    s = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{m:.1%} +- {s:.1%} (n={len(xs)})" if pct else f"{m:.3f} +- {s:.3f} (n={len(xs)})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x != ""]
    p.add_argument("--seeds", type=ints, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=8, help="TRL's steps (and the target's step)")
    p.add_argument("--rlvr-steps", type=int, default=0, help="rlvr's steps (default: --steps)")
    p.add_argument("--eval-at", type=ints, default=[4, 8],
                   help="steps evaluated in each run (step 0, the base model, is evaluated once)")
    p.add_argument("--rlvr-eval-extra", type=ints, default=[], help="rlvr-only eval steps")
    p.add_argument("--test", type=int, default=200)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--micro-batches", type=int, default=8,
                   help="gradient-accumulation micro-batches per rollout (the gradient is the same)")
    p.add_argument("--threads", type=int, default=1)
    def trainers(text):
        names = text.split(",")
        if not names or set(names) - {"rlvr", "trl"}:
            raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated subset of rlvr,trl")
        return names
    p.add_argument("--who", type=trainers, default=["rlvr", "trl"],
                   help="which trainers to run per seed (rlvr,trl)")
    p.add_argument("--pin", action="store_true",
                   help="each process on a core of its own (rlvr 0, TRL 1; with --threads 1): its "
                        "wall time is then its CPU time, whatever finishes beside it")
    p.add_argument("--core", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--summary", action="store_true", help="only print the table of saved results")
    p.add_argument("--trl-out", type=Path, nargs="+", default=None, metavar="DIR",
                   help="--summary: TRL's runs from these folders (default --out; the first "
                        "holding a seed wins), e.g. rlvr rerun after a change on its side only")
    p.add_argument("--pool", type=Path, nargs="*", default=None, metavar="DIR",
                   help="with --summary: also pool --out with these result folders (--out's runs "
                        "win) and test the difference (paired and Welch's t)")
    p.add_argument("--check", action="store_true",
                   help="only the equivalence checks: sampler bias, then --check-steps optimizer steps on the same rollouts")
    p.add_argument("--check-steps", type=int, default=4,
                   help="optimizer steps of --check's same-rollout comparison")
    p.add_argument("--check-on-policy", type=int, default=0, metavar="STEPS",
                   help="only the on-policy check of rlvr's trainer (seed --seed, --group, "
                        "--tokens, --micro-batches), for STEPS steps")
    p.add_argument("--check-bench", type=int, default=0, metavar="STEPS",
                   help="only the same-rollout comparison in the benchmark's own configuration "
                        "(seed --seed, the environment's rewards), for STEPS steps")
    p.add_argument("--check-rates", choices=["shared", "hf"],
                   help="only the sampler success-rate check for one sampler (run both, compare)")
    p.add_argument("--rate-prompts", type=int, default=64)
    p.add_argument("--rate-samples", type=int, default=16, help="samples per prompt")
    p.add_argument("--run", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--model", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    a.rlvr_steps = a.rlvr_steps or a.steps
    if a.run:
        child(a)
        return
    if a.check_rates or a.check_on_policy or a.check_bench or a.check:
        import rlvr
        import torch
        from rlvr.trainer.models.smollm import smollm2_folder
        torch.set_num_threads(a.threads)
        _register_env()
        a.model, env = smollm2_folder(), rlvr.load_env(ENV_NAME)
        if a.check_rates:
            a.out.mkdir(parents=True, exist_ok=True)
            print(check_rates(a.model, env, a.check_rates, a.rate_prompts, a.rate_samples, a.tokens,
                              a.out / f"rates-{a.check_rates}.json"), flush=True)
        elif a.check_on_policy:
            print(check_on_policy(a, a.check_on_policy), flush=True)
        elif a.check_bench:
            print(check_steps_bench(a, a.check_bench), flush=True)
        else:
            print(check_samplers(a.model, env), flush=True)
            print(check_sampler_logits(a.model, env), flush=True)
            print(check_steps(a.model, a.check_steps), flush=True)
        return
    a.out.mkdir(parents=True, exist_ok=True)
    if not a.summary:
        from rlvr.trainer.models.smollm import smollm2_folder
        a.model = smollm2_folder()
        print(f"model {a.model}; load {os.getloadavg()}", flush=True)
        base_accuracy(a)
        for seed in a.seeds:
            run_pair(a, seed)
    summary(a)
    if a.pool is not None:
        print()
        pooled([a.out, *a.pool], a.eval_at)


if __name__ == "__main__":
    main()
