"""Supervised examples: dataset rows in TRL's formats -> token ids and the mask of trained tokens.

Formats (https://huggingface.co/docs/trl/dataset_formats), told apart by their keys:

- prompt + completion, standard (`prompt` and `completion` strings) or conversational
  (`prompt` a list of chat messages, `completion` a list of assistant messages): the loss is on
  the completion only. This is what `rlvr distill-data` writes (the environment's Task.prompt
  as it is, the verified completion), with other keys (task_id, reward, ...) ignored.
- messages (conversational language modelling): the loss is on every assistant turn.
- text (standard language modelling): the loss is on every token.

The masking rule: a prompt is rendered by `encode_prompt`, the same function the trainer and
`rlvr eval` use to sample (the chat template with its generation prompt, or a plain string as
it is), so the tokens the student is trained to continue are the tokens it will later be asked
to continue. The trained tokens are the completion's own tokens and then the tokenizer's EOS, so
the student learns to stop. A later turn's environment tokens (the template's end of the turn,
the next user message, the next assistant header) are rendered by `env_token_ids`, as the
multi-turn rollout renders them, and never trained on.
"""
from __future__ import annotations

import random
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from rlvr.rows import BadRow, iter_rows

from rlvr.trainer.sampling.episodes import env_token_ids
from rlvr.trainer.sampling.rollout import encode_prompt

__all__ = ["Example", "DataError", "row_format", "encode_row", "load_examples", "split_held_out",
           "after_generation_prompt"]


class DataError(ValueError):
    """A dataset that cannot be trained on (the message names the row and the fix)."""


@dataclass
class Example:
    """One training sequence: `ids` and, per token, whether it is a target of the loss."""
    ids: list[int]
    trained: list[bool]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_targets(self) -> int:
        """Tokens the loss predicts (a sequence's first token is never predicted)."""
        return sum(self.trained[1:])


def row_format(row) -> str:
    """'prompt_completion', 'messages' or 'text', read from the row's keys."""
    if not isinstance(row, dict):
        raise DataError(f"expected a JSON object, got {type(row).__name__}")
    if "prompt" in row and "completion" in row:
        return "prompt_completion"
    if "messages" in row:
        return "messages"
    if "text" in row:
        return "text"
    raise DataError(f"no known format in keys {sorted(row)[:8]}: give `prompt` + `completion`, "
                    "`messages`, or `text` (TRL's dataset formats, docs/sft.md)")


def _content(message, where: str) -> str:
    if not (isinstance(message, dict) and isinstance(message.get("content"), str)
            and isinstance(message.get("role"), str)):
        raise DataError(f"{where}: a chat message needs a string `role` and `content`")
    return message["content"]


def _assistant_ids(tokenizer, text: str, where: str) -> list[int]:
    """A completion's tokens as the student writes them, then EOS."""
    if not text.strip():
        raise DataError(f"{where} is empty: drop the row or give it a completion")
    return tokenizer(text, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]


def after_generation_prompt(tokenizer, context: list[dict], text: str) -> str:
    """`text` less what the chat template's generation prompt already ends with: a template
    that opens the assistant turn with `<think>` samples the student after that prefill, so a
    trace that begins with `<think>` is trained from after it (not taught to open it twice)."""
    try:
        bare = tokenizer.apply_chat_template(context, tokenize=False)
        full = tokenizer.apply_chat_template(context, add_generation_prompt=True, tokenize=False)
    except Exception:       # a template that cannot render the context fails later, named
        return text
    prefill = full[len(bare):] if full.startswith(bare) else ""
    for k in range(min(len(prefill), len(text)), 0, -1):
        if prefill.endswith(text[:k]) and text[:k].strip():
            return text[k:]
    return text


def _conversation(tokenizer, context: list[dict], turns: list[dict], where: str,
                  tools: list[dict] | None = None) -> tuple[list[int], list[bool]]:
    """`context` (messages, not trained on) followed by `turns`, whose assistant messages are
    trained on and whose other messages are rendered as the multi-turn rollout renders the
    environment's replies; `tools` (the row's tool schemas) shown as the rollout shows them."""
    for i, m in enumerate(context):
        _content(m, f"{where} message {i + 1}")
    if not turns or not isinstance(turns[0], dict) or turns[0].get("role") != "assistant":
        raise DataError(f"{where}: no assistant turn to train on after the prompt")
    ids = encode_prompt(tokenizer, context, tools)
    trained = [False] * len(ids)
    history, before_reply, pending = list(context), None, []
    for i, m in enumerate(turns):
        text = _content(m, f"{where} turn {i + 1}")
        if m["role"] != "assistant":
            pending.append(m)
            continue
        if before_reply is not None:     # the end of the last reply, the environment's turn
            env = env_token_ids(tokenizer, before_reply, pending, tools, ended_with_eos=True)
            ids += env
            trained += [False] * len(env)
            history += pending
        if before_reply is None:         # the first reply follows the generation prompt
            text = after_generation_prompt(tokenizer, context, text)
        reply = _assistant_ids(tokenizer, text, f"{where} assistant turn {i + 1}")
        ids += reply
        trained += [True] * len(reply)
        before_reply, pending = list(history), []
        history.append(m)
    return ids, trained


def encode_row(tokenizer, row, where: str = "row") -> Example:
    """One dataset row -> an Example (DataError naming `where` and the fix when it cannot)."""
    try:
        kind = row_format(row)
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None
    tools = row.get("tools") or None      # TRL's `tools` column: tool schemas for the template
    if tools is not None and not (isinstance(tools, list)
                                  and all(isinstance(t, dict) for t in tools)):
        raise DataError(f"{where}: `tools` must be a list of tool schemas (JSON objects)")
    if kind == "text":
        text = row["text"]
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{where}: `text` is empty or not a string")
        ids = tokenizer(text).input_ids + [tokenizer.eos_token_id]
        return Example(ids, [True] * len(ids))
    if kind == "messages":
        messages = row["messages"]
        if not isinstance(messages, list) or not messages:
            raise DataError(f"{where}: `messages` must be a non-empty list of chat messages")
        first = next((i for i, m in enumerate(messages)
                      if isinstance(m, dict) and m.get("role") == "assistant"), None)
        if first is None or first == 0:
            raise DataError(f"{where}: `messages` needs a user turn and then an assistant turn")
        return Example(*_conversation(tokenizer, messages[:first], messages[first:], where,
                                      tools))
    prompt, completion = row["prompt"], row["completion"]
    if isinstance(prompt, str):
        if not isinstance(completion, str):
            raise DataError(f"{where}: a string prompt takes a string completion (a list of "
                            "messages goes with a list-of-messages prompt)")
        ids = encode_prompt(tokenizer, prompt, tools)
        reply = _assistant_ids(tokenizer, completion, f"{where} completion")
        return Example(ids + reply, [False] * len(ids) + [True] * len(reply))
    if isinstance(prompt, list) and prompt:
        if not isinstance(completion, list):
            raise DataError(f"{where}: a list-of-messages prompt takes a completion that is a "
                            "list of messages, e.g. [{\"role\": \"assistant\", \"content\": ...}]")
        return Example(*_conversation(tokenizer, prompt, completion, where, tools))
    raise DataError(f"{where}: `prompt` must be a non-empty string or list of chat messages")


def load_examples(source: str, tokenizer, split: str = "train") -> list[Example]:
    """Every row of `source` (JSONL, Parquet, a `datasets` folder or a hub id) as an Example;
    the first row that cannot be trained on stops the read with a DataError naming it."""
    if not source:
        raise DataError("no training data: set data=FILE.jsonl (or a datasets folder or hub id)")
    if not Path(source).exists() and Path(source).suffix:
        raise DataError(f"data file not found: {source}; check the path")
    examples = []
    try:
        for n, row in iter_rows(source, split):
            where = f"{source} line {n}" if Path(source).is_file() else f"{source} row {n}"
            if isinstance(row, BadRow):
                raise DataError(f"{where}: {row.reason}")
            examples.append(encode_row(tokenizer, row, where))
    except FileNotFoundError as exc:
        raise DataError(str(exc)) from None
    if not examples:
        raise DataError(f"{source} holds no rows to train on")
    _warn_think_opened_twice(tokenizer, examples)
    return examples


def _warn_think_opened_twice(tokenizer, examples: list[Example]) -> None:
    """A completion that opens `<think>` right after a prompt whose template already opened it
    (a think-opening tokenizer, or a base template ending in `<think>`) teaches the student a
    format it is never sampled in: warned about once, with the count and the fix."""
    twice = sum(1 for e in examples if re.search(r"<think>\s*<think>", tokenizer.decode(e.ids)))
    if twice:
        warnings.warn(f"{twice} of {len(examples)} examples open <think> twice: the prompt "
                      "already ends with <think> and the completion begins with it again; strip "
                      "it from the completions, or use a tokenizer whose template does not open "
                      "the think block", stacklevel=3)


def truncate(examples: list[Example], max_length: int) -> list[Example]:
    """Examples cut to max_length tokens; one warning counts the cut ones, and those left with
    nothing to train on are dropped (a DataError when that is all of them)."""
    kept, cut, dropped = [], 0, 0
    for ex in examples:
        if len(ex) > max_length:
            cut += 1
            ex = Example(ex.ids[:max_length], ex.trained[:max_length])
        if ex.n_targets == 0:
            dropped += 1
            continue
        kept.append(ex)
    if not kept:
        raise DataError(f"every example's prompt fills max_length={max_length}: raise max_length")
    if cut:
        gone = f"; {dropped} kept no completion token and were dropped" if dropped else ""
        warnings.warn(f"{cut} of {len(examples)} examples are longer than max_length="
                      f"{max_length} and were cut (their completions lose the end and the EOS"
                      f"{gone}): raise max_length", stacklevel=2)
    return kept


def split_held_out(examples: list[Example], fraction: float, seed: int
                   ) -> tuple[list[Example], list[Example]]:
    """(train, held-out): a seeded random `fraction` of the examples held out."""
    if fraction <= 0:
        return examples, []
    order = list(range(len(examples)))
    random.Random(f"{seed}/held-out").shuffle(order)
    n = max(1, round(fraction * len(examples)))
    if n >= len(examples):
        raise DataError(f"eval_fraction={fraction} leaves no training rows out of {len(examples)}")
    held = set(order[:n])
    return ([e for i, e in enumerate(examples) if i not in held],
            [e for i, e in enumerate(examples) if i in held])
