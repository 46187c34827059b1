"""`rlvr sft` on a tiny random Llama with a character tokenizer (one token per character, so
every token count below is read off the strings): the masking rule checked by hand, packed
equal to padded, exact resume, each of TRL's dataset formats, the CLI and its refusals."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rlvr.cli import main
from rlvr.trainer.models.loading import load_policy, load_tokenizer, resolve_model
from rlvr.trainer.sampling.rollout import encode_prompt
from rlvr.trainer.sft import SFTConfig, SFTTrainer, encode_row, sft
from rlvr.trainer.forwards.packing import mask_dtype
from rlvr.trainer.sft.batches import nll_sum, packed, padded
from rlvr.trainer.sft.data import DataError, load_examples

CHAT = {"prompt": [{"role": "user", "content": "2+3?"}],
        "completion": [{"role": "assistant", "content": "5"}]}
TINY = {"batch_size": 2, "grad_accumulation": 2, "lr": 1e-2, "progress": False,
        "tensorboard": False, "checkpoint_every": 0}
VOLATILE = ("timing/", "throughput/", "memory/")


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def sums(n: int) -> list[dict]:
    """Verified-data rows as `rlvr distill-data` writes them (extra keys included)."""
    return [{"prompt": [{"role": "user", "content": f"{a}+{a % 3}?"}],
             "completion": [{"role": "assistant", "content": f"<answer>{a + a % 3}</answer>"}],
             "task_id": f"t/{a}", "reward": 1.0, "status": "ok", "components": {"acc": 1.0}}
            for a in range(n)]


@pytest.fixture(scope="module")
def tok(tiny_model):
    return load_tokenizer(tiny_model)


def ids(tok, text: str) -> list[int]:
    return tok.convert_tokens_to_ids(list(text))


# --- the masking rule ---------------------------------------------------------------------------
def test_prompt_is_rendered_as_the_sampler_renders_it_and_only_the_completion_is_trained(tok):
    ex = encode_row(tok, CHAT)
    # The prompt: exactly the tokens rollouts sample from (the chat template with its
    # generation prompt): "<s>user: 2+3?\nassistant: ".
    prompt = encode_prompt(tok, CHAT["prompt"])
    assert prompt == [tok.bos_token_id] + ids(tok, "user: 2+3?\nassistant: ")
    # Then the completion "5" and EOS, the only trained tokens.
    assert ex.ids == prompt + ids(tok, "5") + [tok.eos_token_id]
    assert ex.trained == [False] * len(prompt) + [True, True]


def test_sft_loss_masks_the_prompt_hand_computed(tiny_model, tok):
    model = load_policy(tiny_model, "float32", torch.device("cpu"))
    ex = encode_row(tok, {"prompt": "7*6=", "completion": "42"})    # a base-template row
    # 1. Zero the final norm's weight: every hidden state is 0, every logit 0, so each
    #    predicted token costs exactly log V. Trained tokens: "4", "2", EOS = 3, so
    #    L = 3 log V (an unmasked prompt would add the 3 tokens after "7": 6 log V).
    with torch.no_grad():
        saved = model.model.norm.weight.clone()
        model.model.norm.weight.zero_()
        assert float(nll_sum(model, padded([ex], tok.pad_token_id, "cpu"))) == \
            pytest.approx(3 * math.log(len(tok)), rel=1e-6)
        model.model.norm.weight.copy_(saved)
    # 2. The random model: the mean of -log softmax(logits[t - 1])[x_t] over t in the
    #    completion, from one plain forward over the whole sequence.
    x = torch.tensor([ex.ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=x).logits[0].float(), -1)
    first = len(ex.ids) - 3
    want = -sum(float(logp[t - 1, ex.ids[t]]) for t in range(first, len(ex.ids))) / 3
    batch = padded([ex], tok.pad_token_id, "cpu")
    assert batch.n_targets == 3
    with torch.no_grad():
        assert float(nll_sum(model, batch)) / 3 == pytest.approx(want, rel=1e-5)


def test_think_opening_template_is_the_prompt_the_student_is_trained_to_continue(tiny_model,
                                                                                 tmp_path):
    from rlvr.trainer.recipes.r1zero import think_tokenizer
    think = load_tokenizer(think_tokenizer(tiny_model, tmp_path))
    ex = encode_row(think, {"prompt": CHAT["prompt"],
                            "completion": [{"role": "assistant", "content": "2+3</think>5"}]})
    n = len(encode_prompt(think, CHAT["prompt"]))
    assert ex.ids[n - 1] == think.convert_tokens_to_ids("<think>") and not ex.trained[n - 1]
    assert ex.trained[n:] == [True] * (len(ex.ids) - n)


def test_a_trace_that_opens_think_is_trained_from_after_the_templates_prefill(tiny_model,
                                                                             tmp_path):
    """`rlvr distill-data` writes `<think>...` for chat prompts; a think-opening template has
    already put `<think>` at the end of the prompt, so the student learns the rest, exactly the
    tokens it writes when sampled. A template without the prefill keeps the trace whole."""
    from rlvr.trainer.recipes.r1zero import think_tokenizer
    think = load_tokenizer(think_tokenizer(tiny_model, tmp_path))
    row = {"prompt": CHAT["prompt"],
           "completion": [{"role": "assistant", "content": "<think>2+3</think>5"}]}
    plain_trace = {**row, "completion": [{"role": "assistant", "content": "2+3</think>5"}]}
    assert encode_row(think, row).ids == encode_row(think, plain_trace).ids
    plain = load_tokenizer(tiny_model)
    assert encode_row(plain, row).ids != encode_row(plain, plain_trace).ids


# --- packing ------------------------------------------------------------------------------------
def gpt2(tok):
    """A tiny GPT-2: absolute position embeddings, so packed positions must restart at 0
    (with RoPE's relative positions an offset would go unnoticed)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2,
                                      n_positions=128)).eval()


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_packing_gives_the_same_loss_and_gradient_as_padding(tiny_model, tok, family):
    model = load_policy(tiny_model, "float32", torch.device("cpu")) if family == "llama" \
        else gpt2(tok)
    rows = [CHAT, {"prompt": "1+1=", "completion": "2"}, {"text": "abc def"},
            {"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "hello there"}]}]
    examples = [encode_row(tok, r) for r in rows]

    def run(batch):
        model.zero_grad()
        loss = nll_sum(model, batch)
        loss.backward()
        return float(loss.detach()), torch.cat([p.grad.flatten() for p in model.parameters()])
    pack = packed(examples, tok.pad_token_id, 64, "cpu", mask_dtype(model))
    assert pack.input_ids.size(0) < len(examples)          # several examples share a row
    loss_pad, grad_pad = run(padded(examples, tok.pad_token_id, "cpu"))
    loss_pack, grad_pack = run(pack)
    assert loss_pack == pytest.approx(loss_pad, rel=1e-5)
    assert torch.allclose(grad_pack, grad_pad, atol=1e-6, rtol=1e-4)


# --- the dataset formats ------------------------------------------------------------------------
def test_standard_prompt_completion_and_text(tok):
    ex = encode_row(tok, {"prompt": "Q: 1+1\nA:", "completion": " 2", "teacher": "x"})
    assert ex.ids == ids(tok, "Q: 1+1\nA: 2") + [tok.eos_token_id]
    assert ex.trained == [False] * 9 + [True, True, True]
    text = encode_row(tok, {"text": "hello"})
    assert text.ids == ids(tok, "hello") + [tok.eos_token_id] and all(text.trained)


def test_messages_train_every_assistant_turn_and_no_user_turn(tok):
    row = {"messages": [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": "a"}, {"role": "assistant", "content": "1"},
                        {"role": "user", "content": "b"}, {"role": "assistant", "content": "2"}]}
    ex = encode_row(tok, row)
    text = tok.decode(ex.ids)
    trained = tok.decode([t for t, m in zip(ex.ids, ex.trained) if m])
    # The whole conversation as the chat template writes it, and only the replies + EOS trained.
    assert text == "<s>system: be brief\nuser: a\nassistant: 1</s>\nuser: b\nassistant: 2</s>"
    assert trained == "1</s>2</s>"
    # The conversational prompt-completion form of the same thing trains the same tokens.
    pc = encode_row(tok, {"prompt": row["messages"][:2], "completion": row["messages"][2:]})
    assert (pc.ids, pc.trained) == (ex.ids, ex.trained)


def test_a_datasets_folder_loads_the_same_examples_as_jsonl(tok, tmp_path):
    import datasets
    rows = sums(3)
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    a = load_examples(write_jsonl(tmp_path / "d.jsonl", rows), tok)
    b = load_examples(str(tmp_path / "ds"), tok)
    assert [(e.ids, e.trained) for e in a] == [(e.ids, e.trained) for e in b]


@pytest.mark.parametrize("row,message", [
    ({"question": "1+1", "answer": "2"}, "no known format"),
    ({"prompt": "1+1=", "completion": "  "}, "empty"),
    ({"prompt": [{"role": "user", "content": "1+1"}], "completion": [{"role": "assistant",
                                                                       "content": ""}]}, "empty"),
    ({"prompt": "1+1=", "completion": [{"role": "assistant", "content": "2"}]},
     "string completion"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "assistant turn"),
])
def test_rows_that_cannot_be_trained_on_are_named(tok, row, message):
    with pytest.raises(DataError, match=message):
        encode_row(tok, row)


# --- the run: resume, folder, CLI ----------------------------------------------------------------
def metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(VOLATILE)}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def weights(run: Path) -> dict:
    from safetensors.torch import load_file
    policy = run / "checkpoints" / (run / "checkpoints" / "latest").read_text() / "policy"
    return load_file(str(next(policy.glob("*.safetensors"))))      # the model or its adapters


@pytest.mark.parametrize("lora", [{}, {"lora_rank": 4, "lora_dropout": 0.1}], ids=["full", "lora"])
def test_resume_is_exact(tiny_model, tmp_path, lora):
    # 6 rows, 4 per step: steps cross epochs. With LoRA, dropout draws from the restored RNG.
    data = write_jsonl(tmp_path / "d.jsonl", sums(6))
    cfg = dict(TINY, model=tiny_model, data=data, **lora)
    sft(SFTConfig(**cfg, output_dir=str(tmp_path / "whole"), steps=4))
    sft(SFTConfig(**cfg, output_dir=str(tmp_path / "cut"), steps=2))
    SFTTrainer.resume(tmp_path / "cut", steps=4).train()
    assert metrics(tmp_path / "cut") == metrics(tmp_path / "whole")
    a, b = weights(tmp_path / "whole"), weights(tmp_path / "cut")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert metrics(tmp_path / "whole")[-1]["loss"] < metrics(tmp_path / "whole")[0]["loss"]


def test_cli_trains_plots_refuses_a_second_run_and_the_run_is_a_model(tiny_model, tmp_path,
                                                                      capsys):
    data = write_jsonl(tmp_path / "d.jsonl", sums(8))
    run = tmp_path / "run"
    argv = ["sft", f"model={tiny_model}", f"data={data}", f"output_dir={run}", "steps=2",
            "batch_size=2", "eval_fraction=0.25", "eval_every=1", "packing=true",
            "--no-progress", "--no-tensorboard"]
    assert main(argv) == 0
    assert all((run / "plots" / f"{name}.png").exists() for name in ("sft_loss", "sft_eval_loss"))
    saved = json.loads((run / "config.json").read_text())
    assert saved["kind"] == "sft" and saved["data"] == {"train_examples": 6,
                                                        "held_out_examples": 2, "steps": 2}
    assert [r["step"] for r in map(json.loads, (run / "eval.jsonl").read_text().splitlines())] \
        == [0, 1, 2]
    # The run folder is a model wherever one is taken: its latest policy.
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step-000002" / "policy")
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.models.loading import load_policy as lp
    assert lp(TrainConfig(model=str(run)).model, "float32", "cpu") is not None
    capsys.readouterr()
    assert main(argv) == 2                        # a second run into the same folder: refused
    assert "rlvr sft --resume" in capsys.readouterr().err
    assert main(["sft", "--resume", str(run), "steps=3", "--no-progress"]) == 0
    assert [r["step"] for r in metrics(run)] == [1, 2, 3]


@pytest.mark.parametrize("setup,message", [
    (lambda d: ["data=" + str(d / "missing.jsonl")], "not found"),
    (lambda d: ["data=" + write_jsonl(d / "q.jsonl", [{"question": "1+1", "answer": "2"}])],
     "line 1: no known format"),
    (lambda d: ["data=" + write_jsonl(d / "e.jsonl", [{"prompt": "1+1=", "completion": ""}])],
     "line 1 completion is empty"),
    (lambda d: [], "no training data"),
    (lambda d: ["data=x.jsonl", "lr_schedule=wavy"], "lr_schedule"),
])
def test_bad_input_is_one_line_exit_2_and_the_old_run_survives(tiny_model, tmp_path, capsys,
                                                               setup, message):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    code = main(["sft", f"model={tiny_model}", f"output_dir={run}", *setup(tmp_path),
                 "--overwrite", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert (run / "metrics.jsonl").exists()       # nothing lost to a run that could not start


def test_a_lora_run_directory_is_named_as_one_to_merge(tmp_path):
    policy = tmp_path / "run" / "checkpoints" / "step-000001" / "policy"
    policy.mkdir(parents=True)
    (policy / "adapter_config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="--merge"):
        resolve_model(str(tmp_path / "run"))


# --- the schedule, the data stream, the precision and memory options -----------------------------
def test_lr_schedule_by_hand():
    from rlvr.trainer.sft.trainer import lr_factor
    # 2 warm-up steps of 10: 1/2, 2/2; then linear decay over the 8 left: step 6 is 4/8 along.
    assert [lr_factor(s, 2, 10, "constant") for s in (0, 1, 5)] == [0.5, 1.0, 1.0]
    assert lr_factor(6, 2, 10, "linear") == pytest.approx(0.5)
    assert lr_factor(6, 2, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))
    assert lr_factor(10, 2, 10, "cosine") == pytest.approx(0.0)


def test_the_example_stream_is_each_epoch_once_and_resumes_where_it_stopped():
    from rlvr.trainer.sft.trainer import ExampleStream
    whole = ExampleStream(5, seed=3).take(15)
    assert all(sorted(whole[i:i + 5]) == list(range(5)) for i in (0, 5, 10))
    assert whole[:5] != whole[5:10]                  # a new shuffle per epoch
    cut = ExampleStream(5, seed=3)
    cut.take(7)
    assert ExampleStream(5, seed=3, cursor=cut.cursor).take(8) == whole[7:]


def test_gradient_checkpointing_and_bf16_train_the_same_step(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", sums(4))
    runs = {}
    for name, kw in {"plain": {}, "ckpt": {"gradient_checkpointing": True},
                     "bf16": {"dtype": "bfloat16"}}.items():
        tr = SFTTrainer(SFTConfig(**TINY, model=tiny_model, data=data, steps=1,
                                  output_dir=str(tmp_path / name), **kw))
        runs[name] = (tr.train_step()["loss"], torch.cat([p.detach().flatten()
                                                         for p in tr.policy.parameters()]))
    (loss, w), (loss_c, w_c), (loss_b, w_b) = runs["plain"], runs["ckpt"], runs["bf16"]
    assert loss_c == pytest.approx(loss, rel=1e-6) and torch.allclose(w_c, w, atol=1e-7)
    assert loss_b == pytest.approx(loss, rel=2e-2)          # bf16 compute, float32 weights
    assert all(p.dtype == torch.float32 for p in tr.policy.parameters())


def test_lora_run_saves_adapters_and_exports_merged(tiny_model, tmp_path):
    from rlvr.trainer.run.export import export_run
    data = write_jsonl(tmp_path / "d.jsonl", sums(4))
    run = sft(SFTConfig(**TINY, model=tiny_model, data=data, steps=1, lora_rank=4,
                        output_dir=str(tmp_path / "lora")))
    policy = run / "checkpoints" / "step-000001" / "policy"
    assert (policy / "adapter_config.json").exists() and not (policy / "model.safetensors").exists()
    out = export_run(run, tmp_path / "merged", merge=True)
    assert load_policy(str(out), "float32", torch.device("cpu")) is not None


def test_a_completion_that_opens_think_after_a_think_opening_prompt_is_warned(tok, tmp_path):
    rows = [{"prompt": "Q: 1+1? A: <think>", "completion": "<think>1+1=2</think> 2"},
            {"prompt": "Q: 1+2? A: <think>", "completion": "1+2=3</think> 3"}]
    with pytest.warns(UserWarning, match="1 of 2 examples open <think> twice"):
        load_examples(write_jsonl(tmp_path / "d.jsonl", rows), tok)


def test_a_toml_config_with_overrides(tmp_path):
    from rlvr.trainer.sft.config import load_sft_config
    toml = tmp_path / "sft.toml"
    toml.write_text('data = "d.jsonl"\nlr = 0.5\npacking = true\n'
                    'lora_target_modules = ["q_proj"]\n')
    cfg = load_sft_config(toml, ["lr=0.25", "epochs=2"])
    assert (cfg.data, cfg.lr, cfg.packing, cfg.epochs, cfg.lora_target_modules) == \
        ("d.jsonl", 0.25, True, 2.0, ("q_proj",))
    with pytest.raises(ValueError, match="unknown key .learning_rate."):
        load_sft_config(None, {"learning_rate": 1.0})


def test_a_rows_tools_are_shown_as_the_rollout_shows_them(tok):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    ex = encode_row(tok, {**CHAT, "tools": tools})
    prompt = encode_prompt(tok, CHAT["prompt"], tools)
    assert prompt != encode_prompt(tok, CHAT["prompt"]) and ex.ids[:len(prompt)] == prompt
    assert ex.trained == [False] * len(prompt) + [True, True]


def test_resume_refuses_a_change_that_makes_another_run(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "step-000001").mkdir(parents=True)
    (run / "checkpoints" / "latest").write_text("step-000001")
    (run / "config.json").write_text(json.dumps(
        {"kind": "sft", "config": SFTConfig(data="d.jsonl", output_dir=str(run)).to_dict()}))
    with pytest.raises(ValueError, match="batch_size, lr cannot change"):
        SFTTrainer.resume(run, lr=1.0, batch_size=3, steps=9)


def test_the_step_loss_is_a_token_mean_whatever_the_micro_batches(tiny_model, tmp_path):
    # 4 completions of 2 to 41 tokens in one step: 1 micro-batch of 4, or 4 of 1 accumulated,
    # packed or not. The loss is sum(NLL) / sum(trained tokens) over the step in every case
    # (a mean of per-micro-batch means would weigh the short completion's tokens 20x more).
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"{n}?", "completion": "x" * n}
                                              for n in (1, 7, 20, 40)])
    out = []
    for i, kw in enumerate([{"batch_size": 4, "grad_accumulation": 1},
                            {"batch_size": 1, "grad_accumulation": 4},
                            {"batch_size": 2, "grad_accumulation": 2, "packing": True}]):
        tr = SFTTrainer(SFTConfig(**{**TINY, **kw}, model=tiny_model, data=data, steps=1,
                                  output_dir=str(tmp_path / str(i))))
        grads = []       # the accumulated gradient the optimizer is handed
        tr.optimizer.step = lambda: grads.append(
            torch.cat([p.grad.flatten() for p in tr.policy.parameters()]))
        m = tr.train_step()
        out.append((m["loss"], m["tokens/trained"], grads[0]))
    for loss, tokens, grad in out[1:]:
        assert loss == pytest.approx(out[0][0], rel=1e-5) and tokens == out[0][1]
        assert torch.allclose(grad, out[0][2], atol=1e-6, rtol=1e-4)
