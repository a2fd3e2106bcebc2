#!/usr/bin/env bash
# Runs on the GPU machine from the repo root with the bundle in .gpu/ (scripts/gpu-bundle):
# every test binary (GPU tests run instead of skipping), a GPT-2 124M training run on GPT-2
# tokens of the bundled corpus, and the step benchmark next to PyTorch. Logs go to $OUT.
#   scripts/gpu/check.sh [tests] [train] [bench]   (default: all three)
set -uo pipefail
out=${OUT:-/tmp/anvil-gpu}
mkdir -p "$out"
what=${*:-tests train dp demo tokbench bench}
export NCCL_NVLS_ENABLE=0
# Some tests and benches find data/ through the source dir they were built from (__FILE__):
# ANVIL_BUILT_FROM=/that/dir links it to this checkout.
[[ -n ${ANVIL_BUILT_FROM:-} ]] && ln -sfn "$PWD" "$ANVIL_BUILT_FROM"
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
  # GPT-2 124M for 200 steps on the bundled corpus tokenized with anvil's GPT-2 BPE.
  .gpu/run preprocess --input .gpu/data/corpus.txt --output-prefix /tmp/kjv --workers 8 \
    --tokenizer-type GPT2BPE --vocab-file data/gpt2/encoder.json \
    --merge-file data/gpt2/vocab.bpe --append-eod --no-progress 2>&1 | tail -4
  .gpu/run train configs/gpt2_124m.ini data.paths=/tmp/kjv_text_document train.steps=200 \
    train.global_batch=32 train.eval_interval=50 train.eval_iters=10 train.log_interval=10 \
    optim.warmup_steps=20 optim.decay_steps=200 2>&1 | tee "$out/train_124m.log" | tail -30
fi
if [[ $what == *dp* ]]; then
  # The DP gradient reduction through NCCL on a one-rank world, on vs off (tokens/s).
  for reduce in false true; do
    echo "--- parallel.reduce_single_rank=$reduce"
    mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE=0 .gpu/run train configs/gpt2_124m.ini \
      data.paths=/tmp/kjv_text_document train.steps=30 train.global_batch=64 \
      train.eval_interval=0 train.eval_iters=0 train.log_interval=10 optim.warmup_steps=5 \
      optim.decay_steps=30 parallel.reduce_single_rank=$reduce 2>&1 | grep -E "step +30/|done|rror"
  done 2>&1 | tee "$out/dp_overlap.txt"
fi
if [[ $what == *demo* ]]; then
  .gpu/run train configs/demo_gpu.ini data.paths=/tmp/kjv_text_document 2>&1 | tail -8
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
