"""The sampler's decode step: one new token per row through a Llama-family decoder, cheaply.

A decode step multiplies a few rows by every weight matrix once. Through the model's own
forward on a CPU in float32, about half of the step is spent outside those products: each of
a block's seven linear layers has MKL's GEMM pack its weight into panels on every call, the
keys and values of a grouped-query cache are copied once per query head (`repeat_kv`) before
attention, and a 4-D mask and the module calls cost Python time per layer. `PackedDecoder`
runs the same maths with the weights fused (q|k|v, gate|up) and packed once per generation
call in the layout oneDNN's GEMM reads (the packing PyTorch's inductor does for frozen CPU
graphs), and attention computed per key-value head over a `GroupedCache`, which keeps a
prompt's keys and values once for all of its rows. Norms, rotary embeddings and the MLP's
activation are the model's own modules and functions. It is used for float32 and bfloat16
models on a CPU, where it measured faster than the forward.

It is speed code: the same function as the model's forward up to float rounding (a few 1e-6
in the logits; the GEMMs sum in another order), so a token drawn where two are that close can
differ. `PackedDecoder.build` compares it with the model's forward on a probe and returns None
when they differ or the model is not a shape it knows; the sampler then calls the model's
forward (with one warning when a model of a known family fails the probe; tests/test_decode.py).
A bfloat16 model is probed in float32 (its weights upcast in place for the probe and restored
bit for bit): bfloat16's rounding moves the logits by whole units, which would hide a wrong
index or mask that float32 shows at once.
"""
from __future__ import annotations

import contextlib
import weakref

import torch
import torch.nn.functional as F
from torch import nn

from rlvr.trainer.forwards.grouped_cache import GroupedCache
from rlvr.trainer.forwards.hf_adapter import (base_model, cache_kwarg, decoder_parts,
                                              repeat_rows, returned_cache)

__all__ = ["PackedDecoder"]

# Decoders whose block is: x + o(attn(rope(q), rope(k), v)) then x + down(act(gate) * up),
# each sub-layer after an RMSNorm, with full (not sliding-window) causal attention.
_FAMILIES = ("llama", "mistral", "qwen2")
# The weights' dtypes it runs (on a CPU; attention always in float32: grouped_cache.py).
_DTYPES = (torch.float32, torch.bfloat16)
# How far the probe's logits may be from the forward's, relative to their largest: float32
# rounding in another summation order (measured ~6e-6 on SmolLM2-135M).
_TOLERANCE = 1e-4


class _Linear:
    """y = x W^T + b with W packed once in oneDNN's layout (the model's forward has MKL repack
    it on every call); a plain F.linear where PyTorch was built without oneDNN."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.bias = bias
        self.packed = torch.backends.mkldnn.is_available()
        self.weight = torch.ops.mkldnn._reorder_linear_weight(weight) if self.packed else weight

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


def _fused(*layers: nn.Linear) -> _Linear:
    weight = layers[0].weight.detach() if len(layers) == 1 else \
        torch.cat([l.weight.detach() for l in layers])
    biases = [l.bias for l in layers]
    bias = None if all(b is None for b in biases) else torch.cat(
        [b.detach() if b is not None else l.weight.new_zeros(l.out_features)
         for l, b in zip(layers, biases)])
    return _Linear(weight, bias)


class _Block:
    """One decoder block's weights, fused and packed, and its model modules."""

    def __init__(self, part: dict):
        self.norm1, self.norm2, self.act = part["norm1"], part["norm2"], part["act"]
        self.qkv = _fused(part["q"], part["k"], part["v"])
        self.split = (part["q"].out_features, part["k"].out_features, part["v"].out_features)
        self.o, self.gate_up, self.down = _fused(part["o"]), _fused(part["gate"], part["up"]), \
            _fused(part["down"])
        self.idx, self.scaling = part["idx"], part["scaling"]


class PackedDecoder:
    """`decoder(tokens [B], pos [B], cache) -> logits [B, V]`: the model's forward for one new
    token per row at positions `pos` (what `model(input_ids=tokens[:, None], position_ids=
    pos[:, None], ...).logits[:, -1]` computes over the same cached keys and values),
    appending each row's key and value to the `GroupedCache`."""

    def __init__(self, model):
        parts, cfg = decoder_parts(model), base_model(model).config
        self.embed, self.norm, self.rotary = parts["embed"], parts["norm"], parts["rotary"]
        self.blocks = [_Block(part) for part in parts["blocks"]]
        self.head = _fused(parts["head"])
        self.head_dim = self.blocks[0].split[0] // cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.rope = parts["apply_rotary"]

    @classmethod
    def build(cls, model) -> "PackedDecoder | None":
        """The decoder for `model`'s current weights, or None when `model` is not a shape it
        knows or the probe did not match the model's forward (then use the model). The probe
        runs once per model; the weights are packed on every call (they change between
        updates; `PackedDecoder(model)` repacks a model that passed)."""
        if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
            return None         # autocast changes the forward's precision; ours does not
        try:
            if not _known_shape(model):
                return None
            if model not in _PROBED:
                with _in_float32(model):
                    _PROBED[model] = cls(model)._matches(model)
                if not _PROBED[model]:
                    _warn(model, "its logits differ from the forward's on the probe")
            return cls(model) if _PROBED[model] else None
        except Exception as exc:   # an internal moved: the model's own forward still works
            _warn(model, f"{type(exc).__name__}: {exc}")
            return None

    @torch.no_grad()
    def __call__(self, tokens: torch.Tensor, pos: torch.Tensor,
                 cache: GroupedCache) -> torch.Tensor:
        B = tokens.size(0)
        x = self.embed(tokens[:, None])                           # [B, 1, H]
        cos, sin = self.rotary(x, pos[:, None])
        d, kv = self.head_dim, self.kv_heads
        for blk in self.blocks:
            h = blk.norm1(x)[:, 0]
            q, k, v = blk.qkv(h).split(blk.split, -1)
            q, k = self.rope(q.view(B, -1, 1, d), k.view(B, kv, 1, d), cos, sin)
            o = cache.attend(blk.idx, q.view(B, kv, -1, d),       # query heads by KV head
                             k, v.view(B, kv, 1, d), blk.scaling)
            x = x + blk.o(o.reshape(B, -1))[:, None]
            gate, up = blk.gate_up(blk.norm2(x)[:, 0]).chunk(2, -1)
            x = x + blk.down(blk.act(gate) * up)[:, None]
        cache.advance()
        return self.head(self.norm(x)[:, 0])

    def _matches(self, model) -> bool:
        """Two prompts (one left-padded), two rows each, continued by two decode steps (the
        second past the cache's room), against the forward on a per-row cache."""
        device = next(model.parameters()).device
        ids = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]], device=device) % self.embed.num_embeddings
        attn = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]], device=device)
        kw = cache_kwarg(model)
        with torch.no_grad():
            theirs = returned_cache(model(input_ids=ids, attention_mask=attn, use_cache=True,
                                          logits_to_keep=1))
            mine = GroupedCache(theirs, attn, 2, room=1)
            repeat_rows(theirs, 2)               # new tensors: `mine` keeps the prompts' own
            attn = attn.repeat_interleave(2, 0)
            pos = attn.sum(-1)
            for tok in ([9, 4, 1, 7], [2, 11, 11, 3]):
                tok = torch.tensor(tok, device=device) % self.embed.num_embeddings
                attn = torch.cat([attn, torch.ones_like(attn[:, :1])], 1)
                got = self(tok, pos, mine)
                want = model(input_ids=tok[:, None], attention_mask=attn,
                             position_ids=pos[:, None], use_cache=True,
                             **{kw: theirs}).logits[:, -1]
                err = (got - want).abs().max()
                if not err <= _TOLERANCE * (1 + want.abs().max()):
                    return False
                pos = pos + 1
        return True


def _warn(model, why: str) -> None:
    """Once per model: a model of a known family sampled through its slower forward."""
    import warnings

    import transformers
    if model in _WARNED:
        return
    _WARNED.add(model)
    warnings.warn(f"the packed decode step is off for this {type(base_model(model)).__name__} "
                  f"(transformers {transformers.__version__}): {why}; sampling runs through "
                  "the model's forward (the same distribution, slower)", RuntimeWarning,
                  stacklevel=4)


@contextlib.contextmanager
def _in_float32(model):
    """`model`'s bfloat16 parameters and buffers upcast to float32 inside the block, restored
    after it (bfloat16 -> float32 -> bfloat16 is exact); nothing changes for a float32 model."""
    base = base_model(model)
    tensors = [t for t in (*base.parameters(), *base.buffers()) if t.dtype == torch.bfloat16]
    for t in tensors:
        t.data = t.data.float()
    try:
        yield
    finally:
        for t in tensors:
            t.data = t.data.to(torch.bfloat16)


def _known_shape(model) -> bool:
    """A float32 or bfloat16 CPU model of a family above, all of its weights in one dtype, laid
    out as `decoder_parts` reads it, with plain linear layers (raises where the layout
    differs)."""
    base = base_model(model)
    cfg = getattr(base, "config", None)
    dtypes = {p.dtype for p in base.parameters()}
    devices = {p.device.type for p in base.parameters()}
    if devices != {"cpu"} or len(dtypes) != 1 or dtypes.pop() not in _DTYPES:
        return False       # measured faster only there (benchmarks/README.md)
    if any(type(p.data) is not torch.Tensor for p in base.parameters()):
        return False       # sharded or quantized tensors (a probe would upcast them in place)
    if getattr(cfg, "model_type", None) not in _FAMILIES:
        return False
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        return False            # a window's cache positions do not line up with ours
    if getattr(cfg, "attention_dropout", 0.0) or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    parts = decoder_parts(model)
    linears = [parts["head"]] + [part[name] for part in parts["blocks"]
                                 for name in ("q", "k", "v", "o", "gate", "up", "down")]
    return all(type(m) is nn.Linear for m in linears)     # not LoRA-wrapped or quantized


# model -> whether its probe matched; models already warned about
_PROBED: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()
_WARNED: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()
