"""Every transformers internal the fast forwards and the samplers rely on, in one place.

The reference forward (trainer/forwards/reference.py) calls a model through its public API only. The
fast ones continue a prompt's KV cache over a group's completions, copy and repeat caches,
cut their autograd graph and replay a layer's cache state under activation checkpointing
(`checkpoint_with_replay`): none of that is public API, and each internal can move in a
transformers release. They are reached through the functions below, and `check_contract`
exercises all of them on a model at start-up, comparing what they compute with the public
forward's values: when one has moved, it raises `ContractError` naming the transformers
version and the internal, and the trainer falls back to the reference forward (public API
only, activation checkpointing included) with one warning instead of failing deep inside a
step.
"""
from __future__ import annotations

import copy
import functools
import inspect
import sys

import torch
from torch import nn

__all__ = ["ContractError", "check_contract", "contract_holds", "base_model", "cache_kwarg",
           "returned_cache", "repeat_rows", "select_rows", "copy_cache", "preallocate",
           "join_rows", "layer_keys_values", "cache_tensors",
           "swap_cache_tensor", "layer_state", "restore_layer_state", "cache_layer",
           "layer_call_cache", "checkpoint_with_replay",
           "attention_implementation", "decoder_layers", "layer_index", "decoder_parts"]


class ContractError(RuntimeError):
    """A transformers internal rlvr's fast path relies on is missing or changed."""


def _version() -> str:
    import transformers
    return transformers.__version__


def base_model(model):
    """The transformers model under a peft wrapper (peft's public `get_base_model`)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


# --- the forward's cache keyword and the cache it returns ------------------------------------
def cache_kwarg(model) -> str:
    """The forward argument that takes a KV cache: `cache` in newer transformers,
    `past_key_values` before."""
    return _cache_kwarg(type(base_model(model)))


@functools.cache
def _cache_kwarg(cls) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def returned_cache(out):
    """The KV cache a forward returned, checked to be one whose rows can be repeated/selected."""
    found = getattr(out, "cache", None)
    cache = found if found is not None else getattr(out, "past_key_values", None)
    if not (hasattr(cache, "batch_repeat_interleave") and hasattr(cache, "batch_select_indices")):
        raise ValueError(f"this model's KV cache ({type(cache).__name__}) cannot be repeated "
                         "over a group; set share_prefix = false")
    return cache


def repeat_rows(cache, n: int) -> None:
    """Each row of the cache repeated n times in place (row i -> rows i*n .. i*n + n - 1)."""
    cache.batch_repeat_interleave(n)


def select_rows(cache, rows: torch.Tensor) -> None:
    """Keep the cache rows `rows` (in that order, repeats allowed) in place."""
    cache.batch_select_indices(rows)


def copy_cache(cache):
    """A copy whose rows can be repeated or selected without touching the original; the
    tensors themselves are shared (repeating and selecting make new ones)."""
    copied = copy.copy(cache)
    copied.layers = [copy.copy(layer) for layer in cache.layers]
    return copied


def preallocate(cache, room: int) -> None:
    """Give every plain growing layer of `cache` room for `room` more positions, in place.

    A growing layer concatenates each decode step's key and value onto the whole cache, a copy
    of every cached token per step; a preallocated one writes the new column into its buffer and
    hands attention a view of the filled part, the same values, so the same outputs. Layers of
    other kinds (sliding windows, quantized) are left as they are."""
    from transformers.cache_utils import DynamicLayer
    for layer in getattr(cache, "layers", ()):
        # filled: a key tensor with positions in it (4.56 leaves `keys` None until the first
        # update; later releases add an `is_initialized` flag beside an empty tensor)
        keys = getattr(layer, "keys", None)
        if type(layer) is DynamicLayer and isinstance(keys, torch.Tensor) and keys.numel():
            layer.__class__ = _preallocated_layer()
            layer.reserve(room)


def join_rows(cache, keep: torch.Tensor, trim: int, other, room: int) -> None:
    """In place: `cache` becomes its rows `keep` (their first `trim` positions dropped) above
    `other`'s rows, both right-aligned to a common width (the shorter left-padded with zeros,
    which the caller's attention mask hides), with room for `room` more positions. Refuses
    layers other than plain growing ones (a sliding window's positions do not line up)."""
    from transformers.cache_utils import DynamicLayer
    for la, lb in zip(cache.layers, other.layers):
        if not (isinstance(la, DynamicLayer) and type(lb) in (DynamicLayer, _preallocated_layer())
                and type(la) in (DynamicLayer, _preallocated_layer())):
            raise ValueError(f"cannot join rows of {type(la).__name__} cache layers")
        for name in ("keys", "values"):
            a, b = getattr(la, name)[keep][..., trim:, :], getattr(lb, name)
            width = max(a.size(-2), b.size(-2))
            buf = a.new_zeros((a.size(0) + b.size(0), a.size(1), width + room, a.size(-1)))
            buf[:a.size(0), :, width - a.size(-2):width] = a
            buf[a.size(0):, :, width - b.size(-2):width] = b
            setattr(la, "_" + name, buf)
            setattr(la, name, buf[..., :width, :])
        la.__class__ = _preallocated_layer()


@functools.cache
def _preallocated_layer():
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        """A DynamicLayer whose keys/values are views [:, :, :length] of larger buffers."""

        def reserve(self, room: int) -> None:
            length = self.keys.size(-2)
            for name in ("keys", "values"):
                t = getattr(self, name)
                buf = t.new_empty(t.shape[:-2] + (length + room, t.size(-1)))
                buf[..., :length, :] = t
                setattr(self, "_" + name, buf)
                setattr(self, name, buf[..., :length, :])

        def update(self, key_states, value_states, *args, **kwargs):
            length, new = self.keys.size(-2), key_states.size(-2)
            if length + new > self._keys.size(-2):
                self.reserve(max(new, length))       # out of room: double it
            for name, states in (("keys", key_states), ("values", value_states)):
                buf = getattr(self, "_" + name)
                buf[..., length:length + new, :] = states
                setattr(self, name, buf[..., :length + new, :])
            return self.keys, self.values

        def _rebuild(self, pick) -> None:
            length = self.keys.size(-2)
            for name in ("keys", "values"):
                buf = pick(getattr(self, "_" + name))
                setattr(self, "_" + name, buf)
                setattr(self, name, buf[..., :length, :])

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._rebuild(lambda buf: buf.repeat_interleave(repeats, dim=0))

        def batch_select_indices(self, indices) -> None:
            length = self.keys.size(-2)

            def pick(buf):      # the filled part only, into a buffer with the same room
                out = buf.new_empty((len(indices),) + tuple(buf.shape[1:]))
                out[..., :length, :] = buf[indices, :, :length]
                return out
            self._rebuild(pick)

        def crop(self, tokens_to_remove: int) -> None:
            super().crop(tokens_to_remove)      # a shorter view of the same buffers

    return PreallocatedLayer


# --- the tensors a cache holds (the graph cut of the shared-prefix forwards) -----------------
def cache_tensors(cache) -> list[tuple[object, str, torch.Tensor]]:
    """(layer, attribute, tensor) for every tensor each cache layer holds."""
    return [(layer, name, t) for layer in getattr(cache, "layers", ())
            for name, t in list(vars(layer).items()) if isinstance(t, torch.Tensor)]


def swap_cache_tensor(layer, name: str, tensor: torch.Tensor) -> None:
    setattr(layer, name, tensor)


def layer_call_cache(kwargs: dict):
    """The KV cache a decoder layer was called with (its keyword differs between versions)."""
    return kwargs.get("cache", kwargs.get("past_key_values"))


def cache_layer(cache, idx: int):
    """Layer `idx` of a cache, or None when the cache has not reached it."""
    if cache is None or idx >= len(cache.layers):
        return None
    return cache.layers[idx]


def layer_state(layer) -> dict:
    """A snapshot of one cache layer (its tensors and counters), for `restore_layer_state`."""
    return dict(vars(layer))


def restore_layer_state(layer, state: dict) -> None:
    vars(layer).clear()
    vars(layer).update(state)


# --- attention and layers ---------------------------------------------------------------------
def attention_implementation(model) -> str | None:
    """The attention implementation transformers runs for `model` (through wrappers)."""
    return getattr(getattr(base_model(model), "config", None), "_attn_implementation", None)


def decoder_layers(model) -> nn.ModuleList:
    """The model's decoder layers (the ModuleList whose members have `self_attn`)."""
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) and hasattr(module[0], "self_attn"):
            return module
    raise ValueError(f"gradient_checkpointing: no decoder layers found in {type(model).__name__}")


def layer_index(layer) -> int:
    """The index under which a decoder layer reads and writes the KV cache."""
    return layer.self_attn.layer_idx


def decoder_parts(model) -> dict:
    """A Llama-family model's pieces by name (trainer/forwards/decode.py recomputes its decode
    step from them): `embed`, `blocks` (one dict per decoder layer: its `q`, `k`, `v`, `o`,
    `gate`, `up`, `down` linear layers, `act`, `norm1` and `norm2` modules, cache `idx` and
    attention `scaling`), `norm`, `rotary` (called as rotary(x, position_ids) -> (cos, sin)),
    `head`, and `apply_rotary` (the modeling module's apply_rotary_pos_emb). Raises
    AttributeError where the model is laid out otherwise."""
    base = base_model(model)
    inner = base.model
    layers = inner.layers[:base.config.num_hidden_layers]
    blocks = [{"q": l.self_attn.q_proj, "k": l.self_attn.k_proj, "v": l.self_attn.v_proj,
               "o": l.self_attn.o_proj, "gate": l.mlp.gate_proj, "up": l.mlp.up_proj,
               "down": l.mlp.down_proj, "act": l.mlp.act_fn, "norm1": l.input_layernorm,
               "norm2": l.post_attention_layernorm, "idx": layer_index(l),
               "scaling": l.self_attn.scaling} for l in layers]
    return {"embed": inner.embed_tokens, "blocks": blocks, "norm": inner.norm,
            "rotary": inner.rotary_emb, "head": base.lm_head,
            "apply_rotary": sys.modules[type(layers[0].self_attn).__module__].apply_rotary_pos_emb}


def layer_keys_values(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) of every layer of a filled cache, each [rows, kv heads, positions, d]."""
    return [(layer.keys, layer.values) for layer in cache.layers]


# --- activation checkpointing that keeps a KV cache exact -----------------------------------
def checkpoint_with_replay(model) -> None:
    """Activation checkpointing per decoder layer that keeps a KV cache exact.

    transformers' own gradient checkpointing switches the KV cache off (a replayed layer would
    append to the cache twice), which the shared-prefix forward needs. Here each layer runs
    under `torch.utils.checkpoint` (non-reentrant); when the backward replays it, the layer's
    cache entry is set back to what it held before the original call and restored after, so
    the replay computes exactly the original tensors while the cache stays as it was."""
    for layer in decoder_layers(model):
        layer.forward = _replayed(layer.forward, layer_index(layer))


def _replayed(forward, idx: int, found: list | None = None):
    """`forward` checkpointed, its cache layer `idx` replayed; `found` (the contract check's
    probe) records for each call with gradients whether the layer's cache was reached."""
    from torch.utils.checkpoint import checkpoint

    def run(hidden_states, *args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(hidden_states, *args, **kwargs)
        layer = cache_layer(layer_call_cache(kwargs), idx)
        if found is not None:
            found.append(layer is not None)
        before = layer_state(layer) if layer is not None else None
        calls = [0]

        def body(h):
            calls[0] += 1
            if calls[0] == 1 or layer is None:
                return forward(h, *args, **kwargs)
            after = layer_state(layer)            # the replay, during backward
            restore_layer_state(layer, before)
            try:
                return forward(h, *args, **kwargs)
            finally:
                restore_layer_state(layer, after)
        # preserve_rng_state: a replayed dropout (LoRA's) draws the masks it drew the first time
        return checkpoint(body, hidden_states, use_reentrant=False, preserve_rng_state=True)
    return run


# --- the contract -----------------------------------------------------------------------------
def check_contract(model) -> None:
    """Exercise every internal above on `model` (two tiny forwards without gradients); raise
    ContractError naming the transformers version and the internal that moved."""
    try:
        _check(model)
    except ContractError:
        raise
    except Exception as exc:     # an internal that moved fails in its own way: name it
        raise ContractError(f"transformers {_version()}: {type(exc).__name__}: {exc}; rlvr's "
                            "fast forward relies on it (trainer/forwards/hf_adapter.py). Use forward = "
                            "\"reference\", or a transformers version in rlvr's tested range") from exc


def _check(model) -> None:
    def need(ok: bool, what: str):
        if not ok:
            raise ContractError(f"transformers {_version()}: {what}; rlvr's fast forward "
                                f"relies on it (trainer/forwards/hf_adapter.py). Use forward = "
                                f"\"reference\", or a transformers version in rlvr's tested range")
    base = base_model(model)
    need(isinstance(attention_implementation(model), str), "config._attn_implementation is gone")
    try:
        layers = decoder_layers(base)
    except ValueError:
        layers = None
    need(layers is not None, "no ModuleList of decoder layers with `self_attn`")
    need(all(isinstance(getattr(getattr(l, "self_attn", None), "layer_idx", None), int)
             for l in layers), "decoder layers' self_attn.layer_idx is gone")
    kw = cache_kwarg(model)
    device = next(base.parameters()).device
    ids = torch.tensor([[1, 2]], device=device)
    with torch.no_grad():
        try:
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        except TypeError as exc:
            need(False, f"the forward refuses use_cache/logits_to_keep ({exc})")
        need(out.logits.size(1) == 1, "logits_to_keep no longer trims the logits")
        try:
            cache = returned_cache(out)
        except ValueError:
            cache = None
        need(cache is not None, "the returned cache has no batch_repeat_interleave / "
                                "batch_select_indices")
        need(isinstance(getattr(cache, "layers", None), list) and len(cache.layers) == len(layers),
             "the cache has no per-layer `layers` list")
        need(len(cache_tensors(cache)) >= 2 * len(layers),
             "cache layers no longer hold their keys and values as tensor attributes")
        copied = copy_cache(cache)
        repeat_rows(copied, 2)
        select_rows(copied, torch.tensor([1], device=device))
        need(all(t.size(0) == 1 for _, _, t in cache_tensors(copied)) and
             all(t.size(0) == 1 for _, _, t in cache_tensors(cache)),
             "repeating/selecting cache rows no longer acts on the layers' tensors")
        state = layer_state(cache.layers[0])
        restore_layer_state(cache.layers[0], state)
        nxt = model(input_ids=ids[:, :1], attention_mask=torch.ones(1, 3, device=device),
                    position_ids=torch.tensor([[2]], device=device), use_cache=True,
                    **{kw: copied}, logits_to_keep=1)
        need(returned_cache(nxt) is not None, f"the forward no longer continues a cache via `{kw}`")
        whole = model(input_ids=torch.cat([ids, ids[:, :1]], 1), logits_to_keep=1)
        need(_same(nxt.logits, whole.logits), f"continuing a copied, repeated and selected "
             f"cache via `{kw}` no longer gives the whole forward's logits")
    _check_replay(model, base, layers, ids, kw, need)


def _check_replay(model, base, layers, ids, kw: str, need) -> None:
    """`checkpoint_with_replay` on `model`'s layers, for one continuation of a cache with
    gradients: every layer must reach its cache entry, and the values and the gradient (to
    the input embeddings) must equal those of the plain forward. The layers are unwrapped
    again after; the model is run in eval mode (no dropout), its mode restored."""
    device, training = ids.device, model.training
    with torch.no_grad():
        cache = returned_cache(model(input_ids=ids, use_cache=True))

    def continuation(probe=None):
        emb = base.get_input_embeddings()(ids[:, :1]).detach().requires_grad_(True)
        out = model(inputs_embeds=emb, attention_mask=torch.ones(1, 3, device=device),
                    position_ids=torch.tensor([[2]], device=device), use_cache=True,
                    **{kw: copy_cache(cache)})
        if probe is not None:
            probe()
        (grad,) = torch.autograd.grad(out.logits.float().sum(), emb)
        return out.logits.detach(), grad

    def reached():
        need(len(found) == len(layers) and all(found),
             "decoder layers are no longer called with the KV cache as `cache` or "
             "`past_key_values`, so checkpointed layers cannot replay it")

    own = [layer.__dict__.get("forward") for layer in layers]
    found: list[bool] = []
    model.eval()
    try:
        with torch.enable_grad():
            plain = continuation()
            for layer in layers:
                layer.forward = _replayed(layer.forward, layer_index(layer), found)
            replayed = continuation(probe=reached)
    finally:
        for layer, forward in zip(layers, own):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward
        model.train(training)
    need(_same(plain[0], replayed[0]) and _same(plain[1], replayed[1]),
         "a checkpointed layer's replay no longer reproduces its forward's values")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5)


def contract_holds(model) -> str | None:
    """None when `check_contract` passes on `model`, else the reason it failed."""
    try:
        check_contract(model)
    except ContractError as exc:
        return str(exc)
    return None
