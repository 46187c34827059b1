"""The local engine in its own process: sampling on this machine beside the update, not in turn.

`ProcessEngine` is the rollout-engine interface (trainer/sampling/engines.py) over a child
process that holds its own copy of the policy and samples with the built-in sampler
(`HFEngine`). Weights reach it through shared memory: `sync_weights` copies the trainer's
tensors into buffers the child maps, then the version they are (updates applied); the child
loads the newest buffers before each request, and answers with the version it sampled with. The
version is a sequence lock: -1 while the trainer writes, and the child keeps a copy only if the
version read before and after it is the same (the child never holds a lock, so a child killed
mid-copy cannot block the trainer). Every answer carries the child's log-prob of each sampled token under softmax(logits / T)
(one forward of its own weights), so the update can correct for the versions between
(trainer/objective/importance.py), as it does for a server's samples.

With `partial_rollouts` the child also looks for newer weights between tokens and loads them
in place, so a generation an update interrupts continues under the new weights; each token's
log-prob and version are recorded where it is drawn (`rollout.TokenRecord`), and the update's
correction applies per token.

A child that dies (killed, out of memory) is started again from the current buffers and the
request sent once more; a second death on the same request stops the run with one line (the
run folder resumes from its last checkpoint, its data cursor at the first untrained step).
"""
from __future__ import annotations

import signal
import threading
import time

import torch

from rlvr.trainer.sampling.episodes import Continuation

__all__ = ["ProcessEngine", "SamplerDied", "behaviour_logprobs"]

_POLL_S = 0.2


class SamplerDied(RuntimeError):
    """The sampler process died twice on the same request."""


@torch.no_grad()
def behaviour_logprobs(model, prompts: list[list[int]], completions: list[list[int]],
                       temperature: float, batch: int = 4) -> list[list[float]]:
    """Each completion token's log-prob under softmax(logits / T) of `model` after its prompt
    (the behaviour policy's, for the importance correction). Rows are right-padded, so every
    row's positions start at 0."""
    device, out = next(model.parameters()).device, []
    for start in range(0, len(prompts), batch):
        seqs = [p + c for p, c in zip(prompts[start:start + batch],
                                      completions[start:start + batch])]
        width = max(map(len, seqs))
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, s in enumerate(seqs):
            ids[i, :len(s)], attn[i, :len(s)] = torch.tensor(s), 1
        logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits.float()
        for i, (p, c) in enumerate(zip(prompts[start:start + batch],
                                       completions[start:start + batch])):
            if not c:
                out.append([])
                continue
            z = logits[i, len(p) - 1:len(p) + len(c) - 1]
            lp = torch.log_softmax(z / temperature if temperature != 1.0 else z, -1)
            out.append(lp.gather(-1, torch.tensor(c, device=device)[:, None]).squeeze(-1)
                       .tolist())
    return out


def _child(spec: dict, shared: dict, version, conn) -> None:
    """The sampler process: load the model, then answer requests until told to stop."""
    from rlvr.trainer.models.loading import autocast, load_policy, load_tokenizer
    from rlvr.trainer.sampling.engines import HFEngine
    from rlvr.trainer.sampling.rollout import TokenRecord
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the trainer's to handle
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    device = torch.device(spec["device"])
    tok = load_tokenizer(spec["tokenizer"])
    model = load_policy(spec["model"], "float32", device).eval().requires_grad_(False)
    engine = HFEngine(model, tok, spec["batch_size"], spec["share_prefix"], with_entropy=True)
    held = {"version": None}

    def refresh() -> int:
        held["version"] = _load_newest(model, shared, version, held["version"])
        return held["version"]
    if spec["partial"]:
        engine.record = TokenRecord(refresh)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, kw = msg
        mine = refresh()
        try:
            with autocast(device, spec["dtype"]):
                answer = _answer(engine, model, kind, kw)
            conn.send(("ok", answer, mine))
        except Exception as exc:             # sent back: the trainer raises it
            conn.send(("error", f"{type(exc).__name__}: {exc}", mine))


def _load_newest(model, shared: dict, version, mine: int | None) -> int:
    """Copy the shared weights into `model` unless it holds them already; their version."""
    while True:
        before = int(version)
        if before == mine:
            return mine
        if before >= 0:
            model.load_state_dict(shared)
            if int(version) == before:
                return before
        time.sleep(0.01)                    # the trainer is writing: read again after it


def _answer(engine, model, kind: str, kw: dict):
    """A rollout (`generate`) or continuations (`generate_ids`), with behaviour log-probs."""
    temperature = kw.get("temperature", 1.0)
    if kind == "generate":
        rollout = engine.generate(**kw)
        if rollout.sampler_logp is None:         # not recorded while sampling
            rollout.sampler_logp = behaviour_logprobs(model, rollout.prompt_ids,
                                                      rollout.completion_ids, temperature)
        return rollout
    ids = engine.generate_ids(**kw)
    logps = behaviour_logprobs(model, kw["contexts"], ids, temperature)
    return [Continuation(i, lp) for i, lp in zip(ids, logps)]


class ProcessEngine:
    """The built-in sampler in a child process, fed weights through shared memory."""

    def __init__(self, cfg, policy, tokenizer_path: str, start_version: int = 0):
        import torch.multiprocessing as mp
        self.mp = mp.get_context("spawn")
        self.spec = {"model": cfg.model, "tokenizer": tokenizer_path, "dtype": cfg.dtype,
                     "device": str(next(policy.parameters()).device),
                     "batch_size": cfg.generation_batch_size, "threads": cfg.sampler_threads,
                     "partial": cfg.partial_rollouts,
                     "share_prefix": cfg.prefix_sharing(next(policy.parameters()).device.type)}
        self.sync_every, self.calls, self.start_version = cfg.sync_every, 0, start_version
        self.shared = {k: v.detach().to("cpu", copy=True).share_memory_()
                       for k, v in policy.state_dict().items()}
        self.version = torch.full((), start_version, dtype=torch.int64).share_memory_()
        self.restarts, self.last_version = 0, start_version
        self.policy = policy               # eos ids and the like (EpisodeEngine reads it)
        self._guard = threading.Lock()     # one request in flight
        self.proc = self.conn = None
        self.closed = False
        self._start()

    def _start(self) -> None:
        """Start a child; `self.proc` only ever names a started one (`close` may join it from
        another thread while a restart is under way)."""
        parent, child = self.mp.Pipe()
        proc = self.mp.Process(target=_child, args=(self.spec, self.shared, self.version, child),
                               daemon=True, name="rlvr-sampler")
        proc.start()
        child.close()
        self.proc, self.conn = proc, parent
        if self.closed:          # closed while this child started: it has no run to serve
            proc.kill()
            proc.join()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _ask(self, kind: str, kw: dict):
        """Send one request and wait for its answer, restarting a child that died once."""
        with self._guard:
            for attempt in range(2):
                try:
                    self.conn.send((kind, kw))
                    while not self.conn.poll(_POLL_S):
                        if not self.proc.is_alive():
                            raise EOFError
                    status, answer, version = self.conn.recv()
                except (EOFError, OSError):
                    code = self.proc.exitcode
                    if self.closed:
                        raise SamplerDied("the sampler process was stopped") from None
                    if attempt:
                        raise SamplerDied(
                            f"the sampler process died twice on one request (exit code {code}); "
                            "the run stops here: resume it from its last checkpoint") from None
                    self.restarts += 1
                    self.conn.close()
                    self._start()
                    continue
                if status == "error":
                    raise RuntimeError(f"the sampler process failed: {answer}")
                self.last_version = version
                return answer

    def generate(self, tasks, group_size, max_new_tokens, *, temperature=1.0, top_p=1.0,
                 greedy=False, seeds=None):
        rollout = self._ask("generate", dict(
            tasks=tasks, group_size=group_size, max_new_tokens=max_new_tokens,
            temperature=temperature, top_p=top_p, greedy=greedy, seeds=seeds))
        rollout.versions = [min(v) if v else self.last_version for v in rollout.token_versions] \
            if rollout.token_versions is not None else [self.last_version] * len(rollout)
        return rollout

    def generate_ids(self, contexts, max_new, *, temperature=1.0, top_p=1.0, greedy=False,
                     seeds=None) -> list[Continuation]:
        return self._ask("generate_ids", dict(contexts=contexts, max_new=max_new,
                                              temperature=temperature, top_p=top_p,
                                              greedy=greedy, seeds=seeds))

    def sync_weights(self, policy) -> None:
        """Called after every update: every `sync_every`-th call writes the policy to the
        shared buffers (the child loads them before its next request)."""
        self.calls += 1
        if self.calls % self.sync_every == 0:
            self.push(policy, self.start_version + self.calls)

    def push(self, policy, version: int) -> None:
        """Write `policy` as `version` (the child loads it before its next request)."""
        self.version.fill_(-1)
        for k, v in policy.state_dict().items():
            self.shared[k].copy_(v.detach())
        self.version.fill_(version)

    def close(self) -> None:
        """Stop the child: at once if it is idle, else after 10 s (a request in hand is
        given up; the caller waiting for it gets SamplerDied)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
