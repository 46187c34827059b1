"""Memory behaviour of the trainer on a tiny random model: the log-probs path equals a plain
full-vocabulary log-softmax (values and gradients), gradients do not outlive the optimizer
step, LoRA's reference is the policy's own weights (no second copy), and with glibc's mmap
threshold pinned (trainer/forwards/allocator.py) freed tensors leave the process. The peak RSS these
buy is measured in benchmarks/README.md ("Trainer memory")."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
import torch

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.forwards.fast import completion_logprobs, pack, plan_groups
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.loading import AdaptersOff
from rlvr.trainer.models.tiny import build_tiny_model

TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 12,
        "micro_batch_size": 6, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False, "temperature": 0.7,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base"}}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def trainer(model, out, **kw) -> Trainer:
    return Trainer(TrainConfig.from_preset("grpo", **{**TINY, "model": model,
                                                      "output_dir": str(out), "steps": 1, **kw}))


def plain_logprobs(model, mb, temperature):
    """Every [prompt | completion] row through the model whole, log_softmax over the full
    vocabulary at every position, the completion tokens picked out."""
    G, C = mb.repeats, mb.targets.size(1)
    ids = torch.cat([mb.prompt_ids.repeat_interleave(G, 0), mb.targets], 1)
    attn = torch.cat([mb.prompt_mask.repeat_interleave(G, 0), mb.mask.long()], 1)
    pos = (attn.cumsum(-1) - 1).clamp_min(0)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, -(C + 1):-1]
    logp = torch.log_softmax(logits.float() / temperature, -1)
    return logp.gather(-1, mb.targets.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("share_prefix", [True, False])
def test_logprobs_and_gradients_equal_a_full_vocabulary_log_softmax(tiny_model, tmp_path,
                                                                    share_prefix):
    tr = trainer(tiny_model, tmp_path / "r")
    rollout, _ = tr.collect()
    mb = pack(plan_groups(rollout, 6)[0], rollout.prompt_ids, rollout.completion_ids,
              tr.tokenizer.pad_token_id, "cpu", share_prefix)
    weights = torch.randn(mb.targets.shape, generator=torch.Generator().manual_seed(0))

    def run(fn):
        tr.policy.zero_grad(set_to_none=True)
        logp = fn()
        (logp * weights * mb.mask).sum().backward()
        return logp.detach(), [p.grad.clone() for p in tr.policy.parameters()]

    ours, g_ours = run(lambda: completion_logprobs(tr.policy, mb, 0.7)[0])
    plain, g_plain = run(lambda: plain_logprobs(tr.policy, mb, 0.7))
    torch.testing.assert_close(ours[mb.mask], plain[mb.mask], rtol=0, atol=1e-5)
    for a, b in zip(g_ours, g_plain):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_gradients_are_freed_by_the_update_that_used_them(tiny_model, tmp_path):
    # They would otherwise sit through sampling, evaluation and checkpointing until the next
    # update's zero_grad: one parameter-sized buffer (0.5 GiB for SmolLM2-135M).
    tr = trainer(tiny_model, tmp_path / "g")
    at_step = []
    tr.optimizer.register_step_pre_hook(lambda *_: at_step.append(
        sum(p.grad is not None for p in tr.policy.parameters())))
    rollout, _ = tr.collect()
    tr.update(tr.prepare(rollout), first=True)
    assert at_step == [len(list(tr.policy.parameters()))]       # all there for the step
    assert all(p.grad is None for p in tr.policy.parameters())


def test_lora_reference_holds_no_weights_of_its_own(tiny_model, tmp_path):
    tr = trainer(tiny_model, tmp_path / "l", lora_rank=4)
    assert isinstance(tr.ref, AdaptersOff) and tr.ref.peft_model is tr.policy
    full = trainer(tiny_model, tmp_path / "f")       # the full fine-tune does keep a copy
    ptrs = lambda m: {p.data_ptr() for p in m.parameters()}
    assert not ptrs(full.ref) & ptrs(full.policy)


ALLOCATOR_PROBE = """
import sys, torch
from rlvr.trainer.forwards.allocator import release_freed_memory
if sys.argv[1] == "on":
    assert release_freed_memory()
def anon_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) / 1024
big = torch.ones(8 << 18); del big      # a freed 8 MiB block raises glibc's dynamic threshold
base = anon_mib()
xs = [torch.ones(1 << 18) for _ in range(64)]     # 64 tensors of 1 MiB, written
pin = torch.ones(1 << 14)                         # a small block after them on the heap
del xs
print(round(anon_mib() - base))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's mallopt")
def test_freed_tensors_go_back_to_the_os_with_the_threshold_pinned():
    held = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    for mode in ("off", "on"):
        out = subprocess.run([sys.executable, "-c", ALLOCATOR_PROBE, mode], env=env,
                             capture_output=True, text=True, check=True)
        held[mode] = int(out.stdout.split()[-1])
    assert held["off"] >= 48 and held["on"] <= 8, held      # MiB still held after the del


def test_prompt_and_completion_passes_accumulate_their_gradients_separately(tiny_model, tmp_path):
    # With the prompt and the completions in two forwards, autograd would hold every weight's
    # gradient from the completion pass until the prompt pass adds its share (one gradient
    # accumulation per weight: a parameter-sized buffer alive at once). Cut between the two,
    # each pass accumulates into .grad as it goes: two accumulations per weight.
    tr = trainer(tiny_model, tmp_path / "c")
    rollout, _ = tr.collect()
    mb = pack(plan_groups(rollout, 6)[0], rollout.prompt_ids, rollout.completion_ids,
              tr.tokenizer.pad_token_id, "cpu", True)
    layer = tr.policy.model.layers[0].mlp.down_proj.weight
    calls = []
    layer.register_post_accumulate_grad_hook(lambda p: calls.append(1))
    logp, _ = completion_logprobs(tr.policy, mb)
    (logp * mb.mask).sum().backward()
    assert len(calls) == 2


HEAP_REUSE_PROBE = """
import resource, torch
from rlvr.trainer.forwards.allocator import heap_reuse, release_freed_memory
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def anon_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) / 1024
def churn(mib=2, times=50):  # a sampling loop's pattern: the same tensor made and freed
    f = faults()
    for _ in range(times):
        x = torch.ones(mib << 18); del x
    return faults() - f
assert release_freed_memory()
pinned = churn()
base = anon_mib()
with heap_reuse():
    inside = churn()
    xs = [torch.ones(1 << 18) for _ in range(16)]     # 16 MiB on the heap, then freed
    del xs
    held = anon_mib() - base
after = anon_mib() - base
big = churn(24, 10)      # bigger than any hole the block can have left: only the pin decides
ys = [torch.ones(1 << 19) for _ in range(64)]         # 128 MiB after the block, then freed
del ys
print(pinned, inside, big, round(held), round(after), round(anon_mib() - base))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's mallopt")
def test_heap_reuse_serves_sampling_from_the_heap_and_hands_it_back():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", HEAP_REUSE_PROBE], env=env,
                         capture_output=True, text=True, check=True)
    pinned, inside, big, held, after, kept = map(int, out.stdout.split())
    assert pinned >= 50 * 400                     # pinned: a fresh mapping faulted in each time
    assert inside <= pinned / 5                  # in the block: reused from the heap
    assert held >= 12 and after <= 4              # kept in the block, handed back at its end
    assert big >= 10 * 5000                       # the pin is back: a 24 MiB tensor is mapped
    # Freed heap below a live block stays in glibc's bins (its pages given back by the trim)
    # and can serve later tensors, whose pages then stay until the next trim: bounded by the
    # block's high-water mark (2 + 16 MiB here), never the 128 MiB made after it.
    assert kept <= 20


def test_heap_reuse_is_a_no_op_without_the_pin():
    from rlvr.trainer.forwards import allocator
    saved, allocator._pinned = allocator._pinned, None
    try:
        with allocator.heap_reuse():
            pass
        assert allocator._pinned is None
    finally:
        allocator._pinned = saved
