"""Learned reward models behind the same `Reward` interface as the rule-based verifiers.

A `RewardModel` wraps either

- a Hugging Face sequence classifier with one logit (`AutoModelForSequenceClassification`,
  what `rlvr train-rm` and most published reward models save), or
- a causal LM / base transformer with a scalar *value head* on its last hidden state (the head
  lives beside the backbone as `value_head.safetensors`),

loaded from a local directory or a hub id, and returns `Verdict`s like any verifier, so an
environment can weight it against a verifier and the trainer and `rlvr score` never know the
difference. `torch` and `transformers` are imported only when a model is loaded: `import rlvr`
and `import rlvr.verifiers` stay light.

What "scoring" means here, precisely:
- the (prompt, completion) pair is rendered with the tokenizer's chat template (the same
  rendering `rlvr train-rm` trained on, see `render_pair`);
- a pair longer than `max_length` tokens is cut from the left (the completion is what is being
  judged) and the verdict's `reason` says so -- or, with `on_overflow="refuse"`, it is not judged:
  the completion made it too long, so it is `unparsed` with `overflow_score` (the policy's doing,
  scored against it, never an `error` a policy could learn to reach); a prompt too long by
  itself is an `error` (the task's or the config's doing, not the policy's);
- pairs are sorted by length and run in batches under `torch.inference_mode`;
- the score is the model's scalar, optionally normalised (`sigmoid`, or a running mean/std);
  the raw scalar is kept in `Verdict.extracted`;
- a pair that cannot be scored (a prompt that is not text or chat messages, a non-finite output,
  a batch that failed) is a counted `error` verdict with the reason -- never a silent 0.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rlvr.core import ERROR, OK, UNPARSED, BaseReward, Completion, Task, Verdict, as_completion

__all__ = ["RewardModel", "RewardModelConfig", "ScalarModel", "load_scalar_model", "render_pair",
           "RunningNorm", "VALUE_HEAD_FILE", "RM_META_FILE"]

VALUE_HEAD_FILE = "value_head.safetensors"
RM_META_FILE = "rlvr_reward_model.json"
KINDS = ("auto", "classifier", "value_head")
NORMALIZERS = (None, "sigmoid", "running")
OVERFLOWS = ("truncate", "refuse")


# --------------------------------------------------------------------------- rendering

def render_pair(tokenizer, prompt: Any, completion: str, use_chat_template: bool = True) -> str:
    """The text a reward model reads for (prompt, completion); training and scoring share it.

    `prompt` is plain text or chat messages (`[{"role": ..., "content": ...}, ...]`). With a
    chat template the completion is the assistant's turn; without one (or with
    `use_chat_template=False`) a text prompt is simply followed by the completion -- right for
    base-model prompts that end inside `<think>` -- and messages are written as `role: content`
    lines. Raises ValueError on a prompt of any other shape.
    """
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a string, got {type(completion).__name__}")
    messages = _as_messages(prompt)
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            messages + [{"role": "assistant", "content": completion}], tokenize=False)
    if isinstance(prompt, str):
        return prompt + completion
    lines = [f"{m['role']}: {m['content']}" for m in messages]
    return "\n".join(lines + [f"assistant: {completion}"])


def _as_messages(prompt: Any) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, (list, tuple)) and prompt:
        for i, m in enumerate(prompt):
            if not (isinstance(m, dict) and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str)):
                raise ValueError(f"prompt message {i} must be a dict with string 'role' and "
                                 f"'content', got {str(m)[:80]!r}")
        return [dict(role=m["role"], content=m["content"]) for m in prompt]
    raise ValueError("prompt must be text or a non-empty list of chat messages, got "
                     f"{type(prompt).__name__}: {str(prompt)[:80]!r}")


# --------------------------------------------------------------------------- the model

class ScalarModel:
    """(input_ids, attention_mask) -> one reward per row, whichever kind of model is inside.

    `classifier`: a one-logit sequence classifier; Hugging Face pools the last non-pad token.
    `value_head`: a base transformer and a Linear(hidden, 1) on the last attended token
    (inputs are right-padded). Used by `RewardModel` for scoring and by `rlvr train-rm`.
    """

    def __init__(self, kind: str, module, head=None):
        if kind not in ("classifier", "value_head"):
            raise ValueError(f"kind must be 'classifier' or 'value_head', got {kind!r}")
        if (head is None) != (kind == "classifier"):
            raise ValueError("a value_head model needs a head; a classifier has none")
        self.kind, self.module, self.head = kind, module, head

    def __call__(self, input_ids, attention_mask):
        if self.kind == "classifier":
            return self.module(input_ids=input_ids, attention_mask=attention_mask).logits[:, 0]
        import torch
        hidden = self.module(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        last = attention_mask.sum(dim=1) - 1
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return self.head(pooled.to(self.head.weight.dtype))[:, 0]

    def parameters(self):
        yield from self.module.parameters()
        if self.head is not None:
            yield from self.head.parameters()

    def train(self, mode: bool = True) -> "ScalarModel":
        self.module.train(mode)
        if self.head is not None:
            self.head.train(mode)
        return self

    def eval(self) -> "ScalarModel":
        return self.train(False)

    def to(self, device) -> "ScalarModel":
        self.module.to(device)
        if self.head is not None:
            self.head.to(device)
        return self

    @property
    def device(self):
        return next(self.module.parameters()).device

    def state_dict(self) -> dict:
        state = {f"module.{k}": v for k, v in self.module.state_dict().items()}
        if self.head is not None:
            state.update({f"head.{k}": v for k, v in self.head.state_dict().items()})
        return state

    def save(self, out_dir: str | Path, tokenizer=None) -> Path:
        """Write a directory `RewardModel` (and `from_pretrained`) can load back."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.module.save_pretrained(out)
        if tokenizer is not None:
            tokenizer.save_pretrained(out)
        if self.head is not None:
            from safetensors.torch import save_file
            save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                      str(out / VALUE_HEAD_FILE))
        (out / RM_META_FILE).write_text(json.dumps({"kind": self.kind}, indent=2))
        return out


def load_scalar_model(path: str, kind: str = "auto", *, device: str = "cpu",
                      dtype: str | None = None, init_value_head: bool = False, gguf_file: str | None = None):
    """Load (ScalarModel, tokenizer) from a local directory or a hub id.

    `kind="auto"` reads `rlvr_reward_model.json` when present, else takes a checkpoint whose
    architecture ends in `ForSequenceClassification` as a classifier and anything else as a
    backbone for a value head. A value-head backbone without `value_head.safetensors` is refused
    unless `init_value_head=True` (a fresh random head scores nothing meaningful).
    """
    from transformers import AutoConfig, AutoTokenizer
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    config = AutoConfig.from_pretrained(path, **extra)
    kind = _resolve_kind(path, kind, config)
    tokenizer = AutoTokenizer.from_pretrained(path, **extra)
    _ensure_pad_token(tokenizer)
    torch_dtype = _torch_dtype(dtype)
    if kind == "classifier":
        model = _load_classifier(path, config, tokenizer, torch_dtype, extra)
    else:
        model = _load_value_head(path, tokenizer, torch_dtype, extra, init_value_head)
    return model.to(_device(device)).eval(), tokenizer


def _resolve_kind(path: str, kind: str, config) -> str:
    if kind != "auto":
        return kind
    meta = Path(path) / RM_META_FILE
    if meta.is_file():
        return json.loads(meta.read_text())["kind"]
    archs = getattr(config, "architectures", None) or []
    return "classifier" if any(a.endswith("ForSequenceClassification") for a in archs) \
        else "value_head"


def _load_classifier(path, config, tokenizer, torch_dtype, extra) -> ScalarModel:
    from transformers import AutoModelForSequenceClassification
    if getattr(config, "num_labels", 1) != 1 and \
            any(a.endswith("ForSequenceClassification") for a in config.architectures or []):
        raise ValueError(f"{path}: a reward model classifier has one logit, this one has "
                         f"{config.num_labels} (it classifies something else); train one with "
                         "`rlvr train-rm --model {path}`, which puts a one-logit head on it")
    module = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, dtype=torch_dtype, **extra)
    module.config.pad_token_id = tokenizer.pad_token_id
    return ScalarModel("classifier", module)


def _load_value_head(path, tokenizer, torch_dtype, extra, init_value_head) -> ScalarModel:
    import torch
    from transformers import AutoModel
    module = AutoModel.from_pretrained(path, dtype=torch_dtype, **extra)
    hidden = module.config.get_text_config().hidden_size
    head = torch.nn.Linear(hidden, 1)
    head_file = Path(path) / VALUE_HEAD_FILE
    if head_file.is_file():
        from safetensors.torch import load_file
        head.load_state_dict(load_file(str(head_file)))
    elif init_value_head:
        torch.nn.init.normal_(head.weight, std=1.0 / math.sqrt(hidden + 1))
        torch.nn.init.zeros_(head.bias)
    else:
        raise FileNotFoundError(f"{path} has no {VALUE_HEAD_FILE}: it is a backbone without a "
                                "trained value head; train one with `rlvr train-rm --kind "
                                "value_head`, or pass init_value_head=True for a random head")
    return ScalarModel("value_head", module, head)


def _ensure_pad_token(tokenizer) -> None:
    """Batching needs a pad token; models without one pad with EOS (what HF recommends)."""
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ValueError("tokenizer has neither a pad nor an EOS token; set one before use")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"


def _torch_dtype(dtype: str | None):
    if dtype is None:
        return None
    import torch
    value = getattr(torch, dtype, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. float32, bfloat16, float16")
    return value


def _device(device: str) -> str:
    if device == "auto":
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


# --------------------------------------------------------------------------- normalisation

@dataclass
class RunningNorm:
    """Running mean/std of raw scores (Welford), so rewards stay on a stable scale while the
    policy's distribution drifts. A batch updates the statistics, then is normalised with them."""
    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    eps: float = 1e-6

    def update(self, values: Sequence[float]) -> None:
        for x in values:
            self.count += 1
            delta = x - self.mean
            self.mean += delta / self.count
            self.m2 += delta * (x - self.mean)

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 1.0

    def __call__(self, x: float) -> float:
        return (x - self.mean) / (self.std + self.eps)


# --------------------------------------------------------------------------- the reward

@dataclass
class RewardModelConfig:
    """How a `RewardModel` loads and scores. Field docstrings are the documentation."""
    path: str
    """Local directory or hub id (e.g. a directory written by `rlvr train-rm`)."""
    kind: str = "auto"
    """`classifier` (one-logit sequence classifier), `value_head` (backbone + scalar head),
    or `auto` (read from the checkpoint)."""
    name: str = "reward_model"
    """Component name in `Verdict.components` and in logged metrics."""
    device: str = "cpu"
    """`cpu`, `cuda`, `cuda:1`..., or `auto` (GPU when there is one)."""
    dtype: str | None = None
    """Weights dtype (`float32`, `bfloat16`...); None keeps the checkpoint's."""
    batch_size: int = 16
    """Pairs per forward pass."""
    max_length: int = 1024
    """Longest rendered pair in tokens; longer ones are cut from the left and reported."""
    on_overflow: str = "truncate"
    """`truncate` (cut from the left, note it in `reason`) or `refuse` (not judged: `unparsed`
    with `overflow_score`; an `error` only when the prompt alone is too long)."""
    overflow_score: float | None = None
    """What a refused pair scores. Needed unless `normalize="sigmoid"` (whose floor, 0, is the
    default): a raw or standardised score has no floor, and a refusal must not outscore the
    model's judgement of a shorter completion (set it at or below the lowest score it gives)."""
    normalize: str | None = None
    """None (raw scalar), `sigmoid` (into (0, 1)), or `running` (running mean/std)."""
    use_chat_template: bool = True
    """Render pairs with the tokenizer's chat template when it has one."""
    init_value_head: bool = False
    """Allow a value-head backbone without a trained head (random head: benchmarks only)."""
    gguf_file: str | None = None
    """File name of GGUF weights inside `path` (transformers dequantises them)."""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.normalize not in NORMALIZERS:
            raise ValueError(f"normalize must be one of {NORMALIZERS}, got {self.normalize!r}")
        if self.on_overflow not in OVERFLOWS:
            raise ValueError(f"on_overflow must be one of {OVERFLOWS}, got {self.on_overflow!r}"
                             + (" (an overflow the completion causes is the policy's: use "
                                "'refuse')" if self.on_overflow == "error" else ""))
        if self.on_overflow == "refuse" and self.overflow_score is None \
                and self.normalize != "sigmoid":
            raise ValueError("on_overflow='refuse' needs overflow_score=<a score at or below the "
                             "model's lowest> unless normalize='sigmoid' (0 is not the floor of "
                             "a raw or running score)")
        if self.batch_size < 1 or self.max_length < 2:
            raise ValueError("batch_size must be >= 1 and max_length >= 2")


@dataclass
class _Prepared:
    index: int
    ids: list = field(default_factory=list)
    note: str = ""


class RewardModel(BaseReward):
    """A learned reward: the model's scalar for (task.prompt, completion), as a Verdict.

    >>> rm = RewardModel("path/to/rm", normalize="sigmoid")             # doctest: +SKIP
    >>> rm.score(Task("t", prompt="What is 2+2?"), "<answer>4</answer>")  # doctest: +SKIP
    Verdict(score=0.93, status='ok', extracted=2.59, ...)
    """
    learned = True
    """Marks a learned reward: the registry's gold=1/junk=0 contract does not apply to it."""

    def __init__(self, path: str | None = None, *, config: RewardModelConfig | None = None,
                 **kwargs):
        if config is None:
            if path is None:
                raise TypeError("RewardModel needs a path (or config=RewardModelConfig(...))")
            config = RewardModelConfig(path=str(path), **kwargs)
        elif path is not None or kwargs:
            raise TypeError("pass either a config or path/keyword arguments, not both")
        self.config = config
        self.name = config.name
        self.norm = RunningNorm() if config.normalize == "running" else None
        self.stats = {"scored": 0, "truncated": 0, "refused": 0, "errors": 0}
        self._load()

    def _load(self) -> None:
        c = self.config
        self.model, self.tokenizer = load_scalar_model(
            c.path, c.kind, device=c.device, dtype=c.dtype, init_value_head=c.init_value_head,
            gguf_file=c.gguf_file)
        self.version = _fingerprint(c.path, self.model.kind)

    def __getstate__(self):
        """Pickle the recipe, not the weights: a worker reloads the model from `path`."""
        return {"config": self.config, "norm": self.norm, "stats": self.stats}

    def __setstate__(self, state):
        self.config, self.norm, self.stats = state["config"], state["norm"], state["stats"]
        self.name = self.config.name
        self._load()

    # ------------------------------------------------------------------ Reward interface

    def _score(self, task: Task, completion: Completion) -> Verdict:
        return self._score_many([task], [completion])[0]

    def score_batch(self, tasks: Sequence[Task],
                    completions: Sequence[Completion | str]) -> list[Verdict]:
        if len(tasks) != len(completions):
            raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
        start = time.perf_counter()
        verdicts = self._score_many(list(tasks), list(completions))
        share = (time.perf_counter() - start) / max(1, len(verdicts))
        for v in verdicts:
            v.latency_s = share          # amortised: the batch ran as one forward pass
            v.version = v.version or f"{self.name}@{self.version}"
        return verdicts

    def _score_many(self, tasks: list, completions: list) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(tasks)
        prepared = []
        for i, (task, completion) in enumerate(zip(tasks, completions)):
            item = self._prepare(i, task, completion)
            if isinstance(item, Verdict):
                verdicts[i] = item
            else:
                prepared.append(item)
        prepared.sort(key=lambda p: len(p.ids))          # less padding per batch
        size = self.config.batch_size
        for b in range(0, len(prepared), size):
            batch = prepared[b:b + size]
            for item, verdict in zip(batch, self._run_batch(batch)):
                verdicts[item.index] = verdict
        self.stats["scored"] += sum(v.ok for v in verdicts)
        self.stats["errors"] += sum(v.status == ERROR for v in verdicts)
        return verdicts

    def _prepare(self, index: int, task: Task, completion) -> _Prepared | Verdict:
        """Render and tokenise one pair; an unscorable one becomes an error verdict here."""
        try:
            text = render_pair(self.tokenizer, task.prompt, as_completion(completion).text,
                               self.config.use_chat_template)
            ids = self._encode(text)
        except Exception as exc:   # bad shapes, a chat template that rejects the turns...
            return Verdict(0.0, ERROR, reason=f"cannot score: {type(exc).__name__}: {exc}")
        if not ids:
            return Verdict(0.0, ERROR, reason="cannot score: the rendered pair has no tokens")
        note, limit = "", self.config.max_length
        if len(ids) > limit:
            if self.config.on_overflow == "refuse":
                return self._refused(task, len(ids))
            note = f"truncated from {len(ids)} to {limit} tokens (kept the end)"
            ids = ids[-limit:]
            self.stats["truncated"] += 1
        return _Prepared(index, ids, note)

    def _refused(self, task: Task, length: int) -> Verdict:
        """A pair past `max_length`, not judged: the policy's doing unless the prompt alone
        (with an empty completion) is already too long."""
        limit = self.config.max_length
        prompt = len(self._encode(render_pair(self.tokenizer, task.prompt, "",
                                              self.config.use_chat_template)))
        if prompt > limit:
            return Verdict(0.0, ERROR, reason=f"cannot score: the prompt alone is {prompt} tokens "
                                              f"> max_length {limit}; raise max_length")
        self.stats["refused"] = self.stats.get("refused", 0) + 1
        score = 0.0 if self.config.overflow_score is None else float(self.config.overflow_score)
        return Verdict(score, UNPARSED, reason=f"not judged: {length} tokens > max_length "
                                               f"{limit} (the completion made it too long)")

    def _encode(self, text: str) -> list[int]:
        # A chat template writes its own special tokens; plain text gets the tokenizer's (BOS).
        templated = self.config.use_chat_template and bool(
            getattr(self.tokenizer, "chat_template", None))
        return self.tokenizer(text, add_special_tokens=not templated)["input_ids"]

    def _run_batch(self, batch: list[_Prepared]) -> list[Verdict]:
        import torch
        try:
            pad = self.tokenizer.pad_token_id
            width = max(len(p.ids) for p in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, p in enumerate(batch):
                ids[row, :len(p.ids)] = torch.tensor(p.ids)
                mask[row, :len(p.ids)] = 1
            device = self.model.device
            with torch.inference_mode():
                raw = self.model(ids.to(device), mask.to(device)).float().cpu().tolist()
        except Exception as exc:   # e.g. out of memory: these pairs are errors, the run goes on
            reason = f"batch of {len(batch)} failed: {type(exc).__name__}: {exc}"
            return [Verdict(0.0, ERROR, reason=reason) for _ in batch]
        finite = [x for x in raw if math.isfinite(x)]
        if self.norm is not None:
            self.norm.update(finite)
        return [self._verdict(x, p.note) for x, p in zip(raw, batch)]

    def _verdict(self, raw: float, note: str) -> Verdict:
        if not math.isfinite(raw):
            return Verdict(0.0, ERROR, extracted=raw, reason=f"model output is {raw}")
        mode = self.config.normalize
        if mode == "sigmoid":
            # the two branches never overflow exp() for large |raw|
            score = 1 / (1 + math.exp(-raw)) if raw >= 0 else math.exp(raw) / (1 + math.exp(raw))
        elif mode == "running":
            score = self.norm(raw)
        else:
            score = raw
        return Verdict(score, OK, extracted=raw, reason=note)

    def describe(self) -> dict:
        return {"name": self.name, "version": self.version, "kind": self.model.kind,
                **{k: v for k, v in asdict(self.config).items() if k != "name"}}


def _fingerprint(path: str, kind: str) -> str:
    """A short version string that changes when the checkpoint's files change."""
    p = Path(path)
    h = hashlib.sha256(kind.encode())
    if p.is_dir():
        for f in sorted(p.iterdir()):
            if f.is_file():   # small files by content, weights by size (hashing GBs is slow)
                size = f.stat().st_size
                body = f.read_bytes() if size < 1 << 22 else str(size).encode()
                h.update(f.name.encode() + body)
    else:
        h.update(path.encode())
    return f"{kind}-{h.hexdigest()[:10]}"
