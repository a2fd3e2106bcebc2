#!/usr/bin/env bash
# Multi-GPU validation (issue: NCCL TP/PP/DP/ZeRO on 2, 4, 8 GPUs of one host). Runs from the
# repo root on the GPU machine with the bundle in .gpu/ (see scripts/gpu/check.sh):
#   1. the parallel equivalence suite through NCCL: every layout of tests/parallel/
#      gpt_parallel_test.cc (and T5's of t5_trainer_parallel_test.cc) for N ranks, one GPU each,
#      against the single-rank GPU run;
#   2. NCCL bus bandwidth of all-reduce and all-gather from 1 MiB to 1 GiB (bench/comm_bench);
#   3. the scaling runs: GPT 1.3B with DP, TP, PP and ZeRO 1/2/3 (tokens/s per GPU, MFU and
#      memory per GPU from bin/train's log) against the same config on 1 GPU.
# Usage: scripts/gpu/multi_gpu.sh [N (default: all visible GPUs)]. Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/anvil-multi-gpu}
mkdir -p "$out"
n=${1:-$(nvidia-smi -L | wc -l)}
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared hosts
mpi=(mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -"$n"

for np in 1 2 4 8; do
  ((np > n)) && break
  echo "=== equivalence suite, $np GPU(s)"
  "${mpi[@]}" -np "$np" -x ANVIL_PARALLEL_GPU=1 .gpu/run gpt_parallel_test \
    --gtest_filter='GptParallelGpuTest.*' 2>&1 | grep -E "gpu bf16|PASSED|FAILED|Failure" \
    | tee -a "$out/equivalence.txt"
  # T5 through the pipeline runner: PP, TP x PP, PP x DP against one GPU's trainer.
  "${mpi[@]}" -np "$np" -x ANVIL_PARALLEL_GPU=1 .gpu/run t5_trainer_parallel_test \
    --gtest_filter='T5TrainerParallelGpu.*' 2>&1 | grep -E "PASSED|FAILED|Failure|Skipped" \
    | tee -a "$out/equivalence.txt"
done

for np in 2 4 8; do
  ((np > n)) && break
  "${mpi[@]}" -np "$np" .gpu/run comm_bench 1024 2>&1 | tee -a "$out/bandwidth.txt"
done

# Data for the scaling runs: the bundled corpus tokenized with GPT-2 BPE.
.gpu/run preprocess --input .gpu/data/corpus.txt --output-prefix /tmp/kjv --workers 8 \
  --tokenizer-type GPT2BPE --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe \
  --append-eod --no-progress 2>&1 | tail -1
run() {  # run NP LABEL overrides...
  local np=$1 label=$2
  shift 2
  echo "--- $label (np $np)"
  "${mpi[@]}" -np "$np" .gpu/run train configs/gpt2_1.3b.ini data.paths=/tmp/kjv_text_document \
    train.steps=20 train.log_interval=10 train.eval_interval=0 train.eval_iters=0 \
    optim.warmup_steps=2 optim.decay_steps=20 "$@" 2>&1 | grep -E "step +20/|rror" | tail -2
}
{
  # Weak scaling: micro_batch 8 per GPU, 4 micro-batches per GPU per step.
  run 1 "1 GPU" train.micro_batch=8 train.global_batch=32
  for np in 2 4 8; do
    ((np > n)) && break
    run "$np" "DP $np" train.micro_batch=8 train.global_batch=$((32 * np))
    for z in 1 2 3; do
      run "$np" "DP $np ZeRO-$z" train.micro_batch=8 train.global_batch=$((32 * np)) \
        parallel.zero_stage=$z
    done
    run "$np" "TP $np" parallel.tp="$np" train.micro_batch=8 train.global_batch=32
    run "$np" "PP $np" parallel.pp="$np" train.micro_batch=4 train.global_batch=$((16 * np))
  done
} 2>&1 | tee "$out/scaling.txt"
