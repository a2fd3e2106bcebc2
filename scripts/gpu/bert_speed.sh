#!/usr/bin/env bash
# BERT-large training speed next to Hugging Face's BertForPreTraining of the same shape
# (bench/reference/hf_bert.py: eager and torch.compile), in one call on the GPU machine from the
# repo root with the bundle in .gpu/ (scripts/gpu-bundle .gpu build/bench/gpt_step_bench):
# gpt_step_bench's BERT_large_B32_T512 (32 x 512, bf16, 15% masked targets, binary head) and the
# HF steps, then, with PROFILE=1, ncu's per-kernel time of anvil's first BERT step grouped by
# kernel (scripts/gpu/ncu_breakdown.py). The target: >= 1.25x the better of HF's two.
#   scripts/gpu/bert_speed.sh [MODES]     (MODES: default eager,compile)
set -uo pipefail
modes=${1:-eager,compile}
.gpu/run gpt_step_bench --benchmark_filter=BERT 2>&1 | grep -E "gpt_step|rror"
ref=bench/reference/hf_bert.py
python3 "$ref" --modes "$modes" 2>&1 | grep -E "^hf-|Error"
if [[ ${PROFILE:-0} == 1 ]]; then
  csv=$(mktemp)
  # Setup launches a few hundred init kernels; 4000 launches cover them and the first step.
  timeout 300 ncu --metrics gpu__time_duration.sum --csv --launch-count 4000 \
    .gpu/run gpt_step_bench --benchmark_filter=BERT > "$csv" 2> "$csv.err" || tail -3 "$csv.err"
  python3 scripts/gpu/ncu_breakdown.py "$csv"
fi
