"""Sampling completions from the policy and scoring them with the environment's reward.

A `Rollout` is one batch of experience: G completions for each of P prompts, their token ids,
their verdicts and rewards. It is what `pi_old` produced; the update never regenerates it.
"""
from __future__ import annotations

import contextlib
import itertools
import random
from dataclasses import dataclass, field
from typing import Iterator

import torch

from rlvr.core import Completion, Task, Verdict

from rlvr.trainer.forwards.hf_adapter import returned_cache
from rlvr.trainer.forwards.prefix import SharedPrefix, one_pass, prompt_forward
from rlvr.trainer.sampling.draws import draw_tokens
from rlvr.trainer.sampling.prompts import tool_prompt
from rlvr.trainer.sampling.rows import start_rows

__all__ = ["Rollout", "PromptStream", "TokenRecord", "encode_prompt", "generate", "score"]


_FINITE_LIMIT = 50_000_000   # a "finite" source yielding more than this is an unmarked stream


def is_unbounded(source) -> bool:
    """Procedural sources (a task per index, forever) stream; every other source is a finite
    dataset. A custom endless source says so with `unbounded = True`."""
    from rlvr.envs.base import ProceduralSource
    return bool(getattr(source, "unbounded", isinstance(source, ProceduralSource)))


class PromptStream:
    """Training prompts in a reproducible order, with a cursor a checkpoint can restore.

    Procedural environments (unbounded task streams) are read in their own seeded order; any
    finite dataset, whatever its size, is shuffled once per epoch with a seeded RNG and
    repeated. `cursor` counts tasks handed out so far.
    """

    def __init__(self, env, seed: int, split: str = "train", cursor: int = 0):
        self.env, self.seed, self.split = env, seed, split
        self.cursor = 0
        self._it = self._tasks()
        for _ in range(cursor):
            next(self._it)
        self.cursor = cursor

    def _tasks(self) -> Iterator[Task]:
        it = self.env.tasks(self.split, self.seed)
        if is_unbounded(self.env.source):
            yield from it
            return
        rows = list(itertools.islice(it, _FINITE_LIMIT + 1))
        if not rows:
            raise ValueError(f"environment {self.env.name!r} has no {self.split!r} tasks")
        if len(rows) > _FINITE_LIMIT:
            raise ValueError(f"environment {self.env.name!r} yields over {_FINITE_LIMIT:,} "
                             "tasks: if its source is endless, give it `unbounded = True`")
        for epoch in itertools.count():     # epochs of seeded shuffles
            order = list(rows)
            random.Random(f"{self.seed}/{epoch}").shuffle(order)
            yield from order

    def take(self, n: int) -> list[Task]:
        self.cursor += n
        return [next(self._it) for _ in range(n)]


def encode_prompt(tokenizer, prompt, tools: list[dict] | None = None) -> list[int]:
    """Chat messages go through the tokenizer's chat template (environments write messages);
    plain strings (base-model templates like R1-Zero's) are tokenized as they are."""
    kw = {}
    if tools:     # an environment's tool schemas
        prompt, kw = tool_prompt(tokenizer, prompt, tools)
    if isinstance(prompt, list):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False,
                                             **kw)
        return tokenizer(text, add_special_tokens=False).input_ids
    if isinstance(prompt, str):
        return tokenizer(prompt).input_ids
    raise TypeError(f"task prompt must be a string or chat messages, got {type(prompt).__name__}")


@dataclass
class Rollout:
    """Completions of one batch, grouped by prompt: rows g*G .. g*G+G-1 belong to prompt g."""
    tasks: list[Task]                 # one per completion (the prompt's task, repeated)
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]   # ends with EOS when finish_reason == 'stop'
    completions: list[Completion]
    verdicts: list[Verdict] = field(default_factory=list)
    rewards: torch.Tensor | None = None   # [N] float: verdict score (+ shaping)
    valid: torch.Tensor | None = None     # [N] bool: counted in baselines and losses
    group_size: int = 1
    # per row, the entropy of each completion token's sampling distribution, when the sampler
    # measured it (the built-in one does): the update's entropy metric without a forward
    token_entropy: list[list[float]] | None = None
    # per row, the sampler's log-prob of each completion token under softmax(logits / T), when
    # the sampler is another engine's copy of the policy (a server): the update corrects for
    # the mismatch with the trainer's (trainer/objective/importance.py)
    sampler_logp: list[list[float]] | None = None
    # per row, the policy version (updates applied) of the weights that sampled it, when the
    # sampler runs ahead of the update (trainer/sampling/pipeline.py)
    versions: list[int] | None = None
    # per row, the version of each completion token, when a generation may continue under new
    # weights (partial rollouts); `versions` is then each row's oldest
    token_versions: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.completions)

    @property
    def num_groups(self) -> int:
        return len(self) // self.group_size

    def select_groups(self, groups: list[int]) -> "Rollout":
        rows = [g * self.group_size + j for g in groups for j in range(self.group_size)]
        pick = lambda xs: [xs[r] for r in rows]
        return Rollout(pick(self.tasks), pick(self.prompt_ids), pick(self.completion_ids),
                       pick(self.completions), pick(self.verdicts),
                       None if self.rewards is None else self.rewards[rows],
                       None if self.valid is None else self.valid[rows], self.group_size,
                       None if self.token_entropy is None else pick(self.token_entropy),
                       None if self.sampler_logp is None else pick(self.sampler_logp),
                       None if self.versions is None else pick(self.versions),
                       None if self.token_versions is None else pick(self.token_versions))

    @staticmethod
    def concat(parts: list["Rollout"]) -> "Rollout":
        first = parts[0]
        cat = lambda name: [x for p in parts for x in getattr(p, name)]
        measured = all(p.token_entropy is not None for p in parts)
        reported = all(p.sampler_logp is not None for p in parts)
        versioned = all(p.versions is not None for p in parts)
        per_token = all(p.token_versions is not None for p in parts)
        return Rollout(cat("tasks"), cat("prompt_ids"), cat("completion_ids"),
                       cat("completions"), cat("verdicts"),
                       torch.cat([p.rewards for p in parts]), torch.cat([p.valid for p in parts]),
                       first.group_size, cat("token_entropy") if measured else None,
                       cat("sampler_logp") if reported else None,
                       cat("versions") if versioned else None,
                       cat("token_versions") if per_token else None)


def eos_ids(tokenizer, model=None) -> set[int]:
    """Token ids that end a completion: the tokenizer's EOS and the model's generation
    config's (chat models often stop on an end-of-turn token as well)."""
    ids = {tokenizer.eos_token_id}
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos])
    return {i for i in ids if i is not None}


@torch.no_grad()
def generate(model, tokenizer, tasks: list[Task], group_size: int, max_new_tokens: int,
             temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
             batch_size: int = 0, share_prefix: bool = False,
             seeds: list[int] | None = None, with_entropy: bool = False,
             record: "TokenRecord | None" = None, draw: str = "multinomial",
             packed: bool = True) -> Rollout:
    """Sample `group_size` completions per task.

    Completions are cut after their first EOS (kept: the model must learn to stop) and marked
    `stop`; those that reach `max_new_tokens` are marked `length`. No top-k and no repetition
    penalty: the samples must come from pi itself, or the ratio to pi_old is wrong.
    `share_prefix` uses `sample_shared_prefix` (each prompt prefilled once per group, finished
    rows dropped); otherwise Hugging Face `generate`.
    `seeds` (one per task) make sampling reproducible per group: with the shared-prefix sampler
    a group's completions depend only on its seed, not on what else is in the batch (so not on
    the number of data-parallel ranks); HF `generate` is seeded once per call from the call's
    first seed. Without seeds, the global torch RNG is used.
    `with_entropy`: the shared-prefix sampler also records each token's sampling entropy
    (`Rollout.token_entropy`); other paths leave it None.
    `record` (shared-prefix sampler only): each token's sampling log-prob and weight version
    (`Rollout.sampler_logp`, `Rollout.token_versions`), weights swapped between tokens.
    `draw` (shared-prefix sampler only): how tokens are drawn (`draws.DRAWS`); the trainer's
    rollouts keep "multinomial", whose random stream their results depend on.
    `packed` (shared-prefix sampler only): decode steps through the packed decoder where it
    applies (trainer/forwards/decode.py: the same function up to float rounding, faster).
    """
    if seeds is not None and len(seeds) != len(tasks):
        raise ValueError(f"{len(seeds)} seeds for {len(tasks)} tasks")
    if draw != "multinomial" and not share_prefix:
        raise ValueError(f"draw={draw!r} needs the shared-prefix sampler (share_prefix on): "
                         "Hugging Face `generate` draws its own way")
    eos = eos_ids(tokenizer, model)
    prompts = [encode_prompt(tokenizer, t.prompt, t.metadata.get("tools")) for t in tasks]
    per_call = max(1, (batch_size or len(tasks) * group_size) // group_size)
    out = Rollout([], [], [], [], group_size=group_size)
    measure = with_entropy and share_prefix and not greedy
    out.token_entropy = [] if measure else None
    if record is not None:
        if not share_prefix or greedy:
            raise ValueError("recording each token's version needs the shared-prefix sampler "
                             "and sampling (share_prefix on, not greedy)")
        out.sampler_logp, out.token_versions = [], []
    for start in range(0, len(tasks), per_call):
        chunk = prompts[start:start + per_call]
        chunk_seeds = None if seeds is None or greedy else seeds[start:start + per_call]
        entropies = [] if measure else None
        if share_prefix:
            seqs = sample_shared_prefix(model, chunk, group_size, max_new_tokens, eos,
                                        tokenizer.pad_token_id, temperature, top_p, greedy,
                                        seeds=chunk_seeds, entropies=entropies, record=record,
                                        draw=draw, packed=packed)
        else:
            with _seeded(chunk_seeds[0] if chunk_seeds else None, model):
                seqs = _hf_generate(model, chunk, group_size, max_new_tokens, eos,
                                    tokenizer.pad_token_id, temperature, top_p, greedy)
        for k, seq in enumerate(seqs):
            g = start + k // group_size
            completion = to_completion(tokenizer, seq, eos, max_new_tokens)
            ids_k = completion.token_ids
            out.tasks.append(tasks[g])
            out.prompt_ids.append(prompts[g])
            out.completion_ids.append(ids_k)
            out.completions.append(completion)
            if measure:
                out.token_entropy.append(entropies[k][:len(ids_k)])
            if record is not None:
                out.sampler_logp.append(record.logps[k][:len(ids_k)])
                out.token_versions.append(record.versions[k][:len(ids_k)])
    return out


class TokenRecord:
    """What the shared-prefix sampler records per token when weights may change mid-generation
    (partial rollouts): `refresh()` is called before each forward and returns the version of
    the weights it computes with (loading newer ones in place if there are); each sampled
    token's log-prob under softmax(logits / T) and the version whose forward gave its logits
    land in `logps` and `versions`, one list per row of the last `generate` chunk."""

    def __init__(self, refresh):
        self.refresh = refresh
        self.logps: list[list[float]] = []
        self.versions: list[list[int]] = []


def to_completion(tokenizer, seq: list[int], eos: set[int], max_new: int) -> Completion:
    """A sampled token sequence cut after its first EOS (kept, finish reason `stop`) or at
    `max_new` tokens (`length`); its text without the EOS."""
    stop = next((i for i, tok in enumerate(seq) if tok in eos), None)
    ids = seq[:stop + 1] if stop is not None else seq[:max_new]
    text = tokenizer.decode(ids[:-1] if stop is not None else ids, skip_special_tokens=True)
    return Completion(text, ids, "stop" if stop is not None else "length")


def left_pad(prompts: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [n, width], attention mask [n, width]), padded on the left so every
    row's last token sits in the last column (where generation continues)."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        attn[i, width - len(p):] = 1
    return ids.to(device), attn.to(device)


def _hf_generate(model, prompts, G, max_new, eos, pad_id, temperature, top_p, greedy):
    from transformers import GenerationConfig
    cfg = GenerationConfig(
        do_sample=not greedy, temperature=None if greedy else temperature,
        top_p=None if greedy else top_p, top_k=None if greedy else 0, max_new_tokens=max_new,
        num_return_sequences=G, pad_token_id=pad_id, eos_token_id=sorted(eos),
        repetition_penalty=1.0)
    ids, attn = left_pad(prompts, pad_id, next(model.parameters()).device)
    # `generate` fills every field we leave unset from the model's own generation_config
    # (min_p, typical_p, no_repeat_ngram_size, suppress_tokens, min_new_tokens...), and samples
    # would stop being softmax(logits / T): swap in a blank one for the call.
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    saved, base.generation_config = base.generation_config, GenerationConfig()
    try:
        out = model.generate(input_ids=ids, attention_mask=attn, generation_config=cfg)
    finally:
        base.generation_config = saved
    return out[:, ids.size(1):].tolist()


@contextlib.contextmanager
def _seeded(seed: int | None, model):
    """Run a block under a seeded copy of the torch RNG, leaving the global stream untouched."""
    if seed is None:
        yield
        return
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


def _pick(logits: torch.Tensor, temperature: float, top_p: float, greedy: bool,
          groups: list[int] | None = None, gens: list | None = None,
          entropy: list | None = None, logp: list | None = None,
          draw: str = "multinomial") -> torch.Tensor:
    """One token per row from softmax(logits / T), restricted to the top-p nucleus. With
    per-group generators, row i draws from gens[groups[i]] (rows of a group are adjacent).
    `entropy`: a list that receives each row's entropy of softmax(logits / T), the whole
    distribution before top-p (what the trainer's entropy metric measures); `logp`: a list
    that receives each row's log-prob of its token under softmax(logits / T), before top-p (the
    distribution the trainer's log-probs describe). `draw`: how the token is drawn
    (`draws.DRAWS`: the same law, different random streams)."""
    if greedy:
        return logits.argmax(-1)
    z = logits.float()
    scaled = z / temperature if temperature != 1.0 else z      # x / 1 == x
    if draw == "inverse_cdf" and entropy is None and top_p >= 1.0:
        # the draw needs no normalised distribution: exp(x - max) is softmax's numerator
        probs = (scaled - scaled.amax(-1, keepdim=True)).exp_()
    else:
        probs = torch.softmax(scaled, -1)
    if entropy is not None:
        entropy.extend(torch.special.entr(probs).sum(-1).tolist())    # -sum p log p, 0 log 0 = 0
    if top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p       # keep the smallest set reaching top_p
        probs = probs.scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
    tok = draw_tokens(probs, draw, groups, gens)
    if logp is not None:
        logp.extend(torch.log_softmax(scaled, -1).gather(-1, tok[:, None]).squeeze(-1).tolist())
    return tok


def prefill(model, prompts: list[list[int]], pad_id: int, prefix: SharedPrefix | None = None):
    """Run the prompts through the model once: (KV cache, last-position logits [n, V], 2-D
    attention mask). A system prompt and instructions are often most of every prompt (96 of the
    main job's 112 tokens), so a prefix common to all prompts is computed once and each prompt's
    remainder on top of it (`SharedPrefix`, as in the training passes). `prefix`: one that every
    prompt begins with, kept by the caller across calls (its keys and values computed once for
    all of them: a refilling sampler's admissions); else the prompts' own, for this call."""
    device = next(model.parameters()).device
    own = prefix is None
    if own:
        prefix = SharedPrefix.of(prompts, device) if len(prompts) > 1 else None
    ids, mask = left_pad([p[prefix.length if prefix else 0:] for p in prompts], pad_id, device)
    with one_pass(prefix if own else None):
        out, attn = prompt_forward(model, ids, mask, prefix, {"logits_to_keep": 1})
    return returned_cache(out), out.logits[:, -1], attn


def sample_shared_prefix(model, prompts: list[list[int]], G: int, max_new: int, eos: set[int],
                         pad_id: int, temperature: float = 1.0, top_p: float = 1.0,
                         greedy: bool = False, seeds: list[int] | None = None,
                         entropies: list | None = None,
                         record: TokenRecord | None = None,
                         draw: str = "multinomial", packed: bool = True) -> list[list[int]]:
    """Decode G completions per prompt with a KV cache: each prompt is prefilled once (a prefix
    common to all prompts once for all: `prefill`) and its cache shared by its G rows (plain
    `generate` prefills every copy), and rows that emitted EOS leave the batch at once (plain
    `generate` keeps computing them until all finish).
    `seeds`: one per prompt; its group samples from its own generator.
    `entropies`: a list that receives, per row, its tokens' sampling entropies.
    `record`: each token's log-prob and weight version (`TokenRecord`).
    `draw`: how tokens are drawn (`draws.DRAWS`).
    `packed`: decode steps through `PackedDecoder` where it applies (the same function, less
    time; trainer/sampling/rows.py), else the model's forward."""
    device = next(model.parameters()).device
    gens = None if seeds is None else [torch.Generator(device).manual_seed(s) for s in seeds]
    version = record.refresh() if record is not None else None
    cache, logits, attn = prefill(model, prompts, pad_id)
    rows = start_rows(model, cache, attn, G, max_new, packed)
    del cache           # the rows hold what they read of it (the grouped layout: no copy)
    return decode_cached(rows, logits.repeat_interleave(G, 0), max_new, eos,
                         temperature, top_p, greedy, [row // G for row in range(len(prompts) * G)],
                         gens, entropies, record, version, draw)


@torch.no_grad()
def sample_continuations(model, contexts: list[list[int]], max_new: int, eos: set[int],
                         pad_id: int, temperature: float = 1.0, top_p: float = 1.0,
                         greedy: bool = False, seeds: list[int] | None = None,
                         packed: bool = True) -> list[list[int]]:
    """One continuation per context (row i from its own generator `seeds[i]`), the contexts'
    common prefix prefilled once (`rollout.prefill`); `packed` as in `sample_shared_prefix`."""
    device = next(model.parameters()).device
    gens = None if seeds is None else [torch.Generator(device).manual_seed(s) for s in seeds]
    cache, logits, attn = prefill(model, contexts, pad_id)
    rows = start_rows(model, cache, attn, 1, max_new, packed)
    del cache
    return decode_cached(rows, logits, max_new, eos, temperature, top_p, greedy,
                         list(range(len(contexts))), gens)


def decode_cached(rows, logits, max_new: int, eos: set[int],
                  temperature: float, top_p: float, greedy: bool, group_of: list[int],
                  gens: list | None, entropies: list | None = None,
                  record: TokenRecord | None = None, version: int | None = None,
                  draw: str = "multinomial") -> list[list[int]]:
    """Sample up to `max_new` tokens per row from prefilled state (`logits` [B, V] of each
    row's last position, the `rows` of `start_rows`); a row that emits EOS leaves the batch at
    once. Row i samples from gens[group_of[i]].
    `entropies`: a list that receives, per row, the entropy of each token's distribution
    (measured here, where the distribution already exists, it spares the trainer a forward).
    `record`: each token's log-prob and the `version` of the forward that gave its logits;
    `record.refresh()` before each forward may swap the weights in place (the cached keys and
    values of earlier tokens stay those of the older weights, as in PipelineRL's in-flight
    weight updates, Piche et al. 2025; the recorded log-probs are the distribution each token
    was actually drawn from, which is what the importance correction needs); `rows.reload`
    when it does."""
    device = logits.device
    built = version
    # Row bookkeeping stays on the host: one device->host copy of the sampled tokens per step
    # is the only synchronisation (GPU kernels queue ahead otherwise).
    active = list(range(logits.size(0)))
    seqs: list[list[int]] = [[] for _ in active]
    measure = entropies is not None and not greedy
    if measure:
        entropies.extend([] for _ in active)
    if record is not None:
        record.logps, record.versions = [[] for _ in active], [[] for _ in active]
    for t in range(max_new):
        step_entropy = [] if measure else None
        step_logp = [] if record is not None else None
        tok = _pick(logits, temperature, top_p, greedy, [group_of[row] for row in active], gens,
                    step_entropy, step_logp, draw)
        toks = tok.tolist()
        for row, tk in zip(active, toks):
            seqs[row].append(tk)
        for row, h in zip(active, step_entropy or ()):
            entropies[row].append(h)
        for row, lp in zip(active, step_logp or ()):
            record.logps[row].append(lp)
            record.versions[row].append(version)
        keep = [i for i, tk in enumerate(toks) if tk not in eos]
        if t == max_new - 1 or not keep:
            break
        if len(keep) < len(active):              # finished rows leave the batch
            keep_t = torch.tensor(keep, device=device)
            rows.select(keep_t)
            active = [active[i] for i in keep]
            tok = tok[keep_t]
        if record is not None:
            version = record.refresh()
            if version != built:               # new weights: pack them
                rows.reload()
                built = version
        logits = rows.step(tok)
    return seqs


def sampled_entropy(rollout: Rollout, mb) -> torch.Tensor | None:
    """[m, C]: the sampler's entropy at each completion token of micro-batch `mb`, laid out like
    its mask; None when the sampler did not measure it (`Rollout.token_entropy`)."""
    if rollout.token_entropy is None:
        return None
    out = torch.zeros(mb.mask.shape, dtype=torch.float32)
    for k, row in enumerate(mb.rows):
        h = rollout.token_entropy[row]
        out[k, :len(h)] = torch.tensor(h, dtype=torch.float32)
    return out.to(mb.mask.device)


def score(env, rollout: Rollout, drop_failed: bool = True) -> Rollout:
    """Verdicts from the environment's reward; rewards = scores, valid = verdict not failed."""
    rollout.verdicts = env.reward.score_batch(rollout.tasks, rollout.completions)
    rollout.rewards = torch.tensor([v.score for v in rollout.verdicts], dtype=torch.float32)
    rollout.valid = torch.tensor([not (drop_failed and v.failed) for v in rollout.verdicts])
    return rollout
