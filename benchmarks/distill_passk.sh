#!/usr/bin/env bash
# Distillation vs RL on one task, measured as pass@k curves (docs/distillation.md):
#   base      SmolLM2-135M-Instruct as it is
#   grpo      base + GRPO on the task's train split (accuracy + format reward, as the main job)
#   sft       base + SFT on verified step-by-step traces from the environment's own solver
#   sft+grpo  the SFT model + the same GRPO
# each evaluated with `rlvr eval` on the same held-out (test-split) tasks, n samples per task.
#
#   bash benchmarks/distill_passk.sh [STAGE ...]   # stages: base grpo data sft sft_grpo plot
#                                                  # (default: all, in order; each resumes)
# Sizes come from the environment: TASKS (held-out tasks), N (samples per task), KS (the k list),
# GRPO_STEPS, SFT_ROWS, SFT_STEPS, OUT (default runs/distill); the task's difficulty from MAX_VALUE
# and TEST_FRACTION (999: three-digit sums, where the base model is almost never right; 20 with
# TEST_FRACTION=0.5: the main job's sums),
# with TRAIN_TOKENS and EVAL_TOKENS to match; PY and RLVR name the interpreter and the CLI, and
# EVAL_EXTRA adds `rlvr eval` options (e.g. --batch-size 1024 on a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}
PY=${PY:-.venv/bin/python}
RLVR=${RLVR:-.venv/bin/rlvr}
OUT=${OUT:-runs/distill}
TASKS=${TASKS:-200}
N=${N:-64}
GRPO_STEPS=${GRPO_STEPS:-8}
SFT_ROWS=${SFT_ROWS:-2000}
SFT_STEPS=${SFT_STEPS:-60}
SEED=${SEED:-0}
MAX_VALUE=${MAX_VALUE:-999}
KS=${KS:-1,2,4,8,16,32,64}
mkdir -p "$OUT"

# Sums of two integers in [0, MAX_VALUE]: at 999 the base model rarely gets them exactly right.
# TEST_FRACTION (unset: the environment's 0.2) is the held-out share; the main job's is 0.5.
ENV_KWARGS='{"n_terms": 2, "max_value": '$MAX_VALUE', "ops": "+", "parentheses": false, "prompt_style": "chat", "format_weight": 0.5'${TEST_FRACTION:+', "test_fraction": '$TEST_FRACTION}'}'
ENV_ARGS=(--env arithmetic --env-arg n_terms=2 --env-arg max_value=$MAX_VALUE --env-arg ops=+
          --env-arg parentheses=False --env-arg prompt_style=chat --env-arg format_weight=0.5)
[ -n "${TEST_FRACTION:-}" ] && ENV_ARGS+=(--env-arg test_fraction=$TEST_FRACTION)
# The chat template that opens the think block, as the main job's (its recipe builds it).
TOK=$($PY -c 'from pathlib import Path; from rlvr.trainer.models.loading import resolve_model
from rlvr.trainer.recipes.r1zero import think_tokenizer; from rlvr.trainer.models.smollm import default_cache_dir
print(think_tokenizer(resolve_model("smollm2"), default_cache_dir()))')
# Three-digit traces run to 98 tokens (mean 85); the evaluation leaves room past the longest.
TRAIN_TOKENS=${TRAIN_TOKENS:-96}
EVAL_TOKENS=${EVAL_TOKENS:-128}
EVAL=("${ENV_ARGS[@]}" --n "$N" --k "$KS" --tasks "$TASKS" --max-tokens $EVAL_TOKENS
      --temperature 0.7 --seed "$SEED" --no-progress ${EVAL_EXTRA:-})
GRPO=(preset=grpo env=arithmetic "env_kwargs=$ENV_KWARGS" steps=$GRPO_STEPS prompts_per_step=4
      group_size=8 max_completion_length=$TRAIN_TOKENS temperature=0.7 lr=1e-5 micro_batch_size=4
      gradient_checkpointing=true tune_allocator=true checkpoint_every=0 progress=false seed=$SEED)

stage_base() {
  $RLVR eval "${EVAL[@]}" --model smollm2 --tokenizer "$TOK" --label "base SmolLM2-135M" -o "$OUT/base.json"
}
stage_grpo() {
  [ -f "$OUT/grpo/checkpoints/step-$(printf %06d "$GRPO_STEPS")/policy/config.json" ] ||
    $RLVR train "${GRPO[@]}" model=smollm2 tokenizer="$TOK" output_dir="$OUT/grpo" --overwrite
  $RLVR eval "${EVAL[@]}" --model "$OUT/grpo" --label "GRPO ($GRPO_STEPS steps)" -o "$OUT/grpo.json"
}
stage_data() {
  $RLVR distill-data "${ENV_ARGS[@]}" --split train --tasks "$SFT_ROWS" --k 1 --teacher program \
    --seed "$SEED" --no-progress -o "$OUT/traces.jsonl"
}
stage_sft() {
  [ -f "$OUT/sft/checkpoints/step-$(printf %06d "$SFT_STEPS")/policy/config.json" ] ||
    $RLVR sft model=smollm2 tokenizer="$TOK" data="$OUT/traces.jsonl" steps=$SFT_STEPS \
      batch_size=8 lr=1e-4 lr_schedule=cosine warmup_steps=5 max_length=256 packing=true \
      seed=$SEED progress=false output_dir="$OUT/sft" --overwrite
  $RLVR eval "${EVAL[@]}" --model "$OUT/sft" --label "SFT on verified traces" -o "$OUT/sft.json"
}
stage_sft_grpo() {
  [ -f "$OUT/sft_grpo/checkpoints/step-$(printf %06d "$GRPO_STEPS")/policy/config.json" ] ||
    $RLVR train "${GRPO[@]}" model="$OUT/sft" output_dir="$OUT/sft_grpo" --overwrite
  $RLVR eval "${EVAL[@]}" --model "$OUT/sft_grpo" --label "SFT then GRPO ($GRPO_STEPS steps)" -o "$OUT/sft_grpo.json"
}
stage_plot() {
  $RLVR plot passk "$OUT/base.json" "$OUT/grpo.json" "$OUT/sft.json" "$OUT/sft_grpo.json" -o "$OUT/passk.png"
}

for stage in "${@:-base grpo data sft sft_grpo plot}"; do
  for s in $stage; do echo "== $s $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"; "stage_$s"; done
done
