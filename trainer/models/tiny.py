"""A tiny random causal LM with a character-level tokenizer, built offline.

For smoke tests and trying a config in seconds: nothing is downloaded, the folder it writes loads
with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` like any model.

>>> path = build_tiny_model("/tmp/rlvr-tiny")          # doctest: +SKIP
>>> TrainConfig.from_preset("grpo", model=path)       # doctest: +SKIP
"""
from __future__ import annotations

import string
from pathlib import Path

__all__ = ["build_tiny_model", "char_tokenizer", "tiny_llama_config"]

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}")


def char_tokenizer(specials: list[str], chars: list[str], split_pattern: str, chat_template: str,
                   register_specials: bool = False):
    """A character-level fast tokenizer: every special, then every char, one id each; the text
    is split into pieces by `split_pattern` (each match isolated) and each piece looked up.
    The one builder behind the policy's and the reward model's tiny tokenizers."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(specials + chars)},
                                     unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(split_pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    if register_specials:
        tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = chat_template
    return fast


def _tokenizer():
    # Single-character vocabulary plus the tags the R1 format uses, so `<think>` is one token.
    chars = sorted(set(string.printable) - set("\x0b\x0c"))
    tags = "|".join(t.replace("/", "\\/") for t in TAGS)
    return char_tokenizer(SPECIALS + TAGS, chars, f"{tags}|.", CHAT_TEMPLATE)


def tiny_llama_config(tokenizer, layers: int = 2, hidden: int = 32, heads: int = 2,
                      kv_heads: int | None = None, intermediate: int | None = None,
                      max_positions: int = 2048, tie_word_embeddings: bool = True, **extra):
    """A small LlamaConfig sized for `tokenizer` (special ids taken from it)."""
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden,
                       intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=kv_heads or heads,
                       max_position_embeddings=max_positions, bos_token_id=tokenizer.bos_token_id,
                       eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                       tie_word_embeddings=tie_word_embeddings, **extra)


def build_tiny_model(path: str | Path, layers: int = 2, hidden: int = 32, heads: int = 2,
                     seed: int = 0, kv_heads: int | None = None,
                     intermediate: int | None = None) -> str:
    """Write a random `layers`-layer Llama and its char tokenizer to `path`; return the path.
    (Any size: benchmarks/trainer_gpu.py builds SmolLM2-135M's shape with it.)"""
    import torch
    from transformers import LlamaForCausalLM
    tok = _tokenizer()
    config = tiny_llama_config(tok, layers, hidden, heads, kv_heads, intermediate)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    path = Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
