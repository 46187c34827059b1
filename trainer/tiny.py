"""A tiny random causal LM with a character-level tokenizer, built offline.

For smoke tests and trying a config in seconds: nothing is downloaded, the folder it writes loads
with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` like any model.

>>> path = build_tiny_model("/tmp/rlvr-tiny")          # doctest: +SKIP
>>> TrainConfig.from_preset("grpo", model=path)       # doctest: +SKIP
"""
from __future__ import annotations

import string
from pathlib import Path

__all__ = ["build_tiny_model"]

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
# Single-character vocabulary plus the tags the R1 format uses, so `<think>` is one token.
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}")


def _tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    chars = sorted(set(string.printable) - set("\x0b\x0c"))
    vocab = {tok: i for i, tok in enumerate(SPECIALS + TAGS + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tags = "|".join(t.replace("/", "\\/") for t in TAGS)
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(f"{tags}|."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(path: str | Path, layers: int = 2, hidden: int = 32, heads: int = 2,
                     seed: int = 0, kv_heads: int | None = None,
                     intermediate: int | None = None) -> str:
    """Write a random `layers`-layer Llama and its char tokenizer to `path`; return the path.
    (Any size: benchmarks/trainer_gpu.py builds SmolLM2-135M's shape with it.)"""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = _tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden,
                         intermediate_size=intermediate or 2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads or heads, max_position_embeddings=2048,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    path = Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
