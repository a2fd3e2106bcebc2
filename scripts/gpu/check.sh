#!/usr/bin/env bash
# Runs on the GPU machine from the repo root with the bundle in .gpu/ (scripts/gpu-bundle):
# every test binary (GPU tests run instead of skipping), a GPT-2 124M training run on GPT-2
# tokens of the bundled corpus, and the step benchmark next to PyTorch. Logs go to $OUT.
#   scripts/gpu/check.sh [tests] [train] [bench]   (default: all three)
set -uo pipefail
out=${OUT:-/tmp/anvil-gpu}
mkdir -p "$out"
what=${*:-tests train bench tokbench}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [[ $what == *tests* ]]; then
  logs=/tmp/anvil-test-logs
  mkdir -p "$logs"
  for t in .gpu/bin/*_test; do
    name=$(basename "$t")
    if .gpu/run "$name" >"$logs/$name.log" 2>&1; then
      echo "PASS $name ($(grep -c '^\[       OK \]' "$logs/$name.log") ok," \
        "$(grep -c '^\[  SKIPPED \]' "$logs/$name.log") skipped)"
    else
      echo "FAIL $name"; grep -E 'Failure|FAILED|error|CHECK' "$logs/$name.log" | head -20
      cat "$logs/$name.log" >>"$out/failures.log"
    fi
  done 2>&1 | tee "$out/tests.txt"
fi
if [[ $what == *train* ]]; then
  python3 scripts/gpu/tokenize_gpt2.py .gpu/data/corpus.txt /tmp/kjv_gpt2 || exit 1
  .gpu/run train configs/gpt2_124m.ini data.path=/tmp/kjv_gpt2 train.steps=200 \
    train.global_batch=32 train.eval_interval=50 train.eval_iters=10 train.log_interval=10 optim.warmup_steps=20 optim.decay_steps=200 2>&1 | tee "$out/train_124m.log" | tail -40
fi
if [[ $what == *tokbench* ]]; then
  mkdir -p data/demo && cp .gpu/data/corpus.txt data/demo/kjv.txt
  python3 bench/reference/tokenizer_hf.py --file data/demo/kjv.txt 2>&1 | tee "$out/tokenizer_bench.txt"
  .gpu/run tokenizer_bench 2>&1 | tail -12 | tee -a "$out/tokenizer_bench.txt"
  .gpu/run preprocess_bench 2>&1 | tail -12 | tee -a "$out/tokenizer_bench.txt"
fi
if [[ $what == *bench* ]]; then
  .gpu/run gpt_step_bench 2>&1 | tee "$out/bench.txt" | tail -8
  python3 bench/reference/gpt2_pytorch.py --modes eager,compile 2>&1 | tee -a "$out/bench.txt"
fi
