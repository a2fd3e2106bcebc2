#!/usr/bin/env bash
# bin/train --dry-run plans a GPU job on a machine without a GPU (a login node) against a stated
# device memory (ctest train_dry_run_device_test, CPU; bin/dry_run_plan.h):
#   1. configs/demo_gpu.ini ([train] device = cuda) with no GPU visible: the plan is printed,
#      an H100 (81559 MiB) is assumed and said so, "fits", exit 0 (it used to stop with "no
#      CUDA device is visible");
#   2. --device-memory h200 / 141GB / 8GiB: fits, exit 0; --device-memory 100MiB: "does not
#      fit" naming both sizes, exit 1; a micro-batch too large for an H100: exit 1, and fits an
#      H200 when it does;
#   3. the same on a CPU config: the stated memory replaces the host's;
#   4. a bad size, --device-memory without --dry-run: exit 2 with a message;
#   5. --world N plans a cluster config from one process: configs/tr11_bloom_176b.ini at its 384
#      ranks prints all 12 pipeline stages and fits 80 GiB with ZeRO-1 (the fork's BF16_Optimizer)
#      but not with zero_stage 0; without --world the 384-rank layout is refused on one rank;
#      --world without --dry-run, or 0, is refused.
# With a GPU visible, case 1's assumption does not apply and is skipped.
# usage: train_dry_run_device_test.sh BUILD/bin/train BUILD/bin/preprocess (from the repo root)
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf 'In the beginning was the word.\n\nAnd the word was.\n' > "$work/c.txt"
"$preprocess" --input "$work/c.txt" --output-prefix "$work/c" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 1 \
  --no-progress > "$work/pre.log" 2>&1 || fail "preprocess: $(tail -2 "$work/pre.log")"
data=(data.paths="$work/c_text_document" data.cache_dir="$work/cache")

# run RC PATTERN ARGS...: bin/train ARGS exits RC with PATTERN in its output.
run() {
  local want=$1 pattern=$2 rc=0
  shift 2
  timeout 120 "$train" "$@" > "$work/out.log" 2>&1 || rc=$?
  [[ $rc == "$want" ]] || fail "train $* exited $rc, expected $want: $(tail -3 "$work/out.log")"
  grep -qF -- "$pattern" "$work/out.log" || fail "train $*: no '$pattern' in: $(tail -3 "$work/out.log")"
}

gpu=$("$train" --print-device)
if [[ $gpu == cpu ]]; then
  run 0 "dry run: fits: the memory plan of this rank needs" configs/demo_gpu.ini "${data[@]}" --dry-run
  grep -qF "an H100 80 GB (81559 MiB) assumed: no GPU is visible" "$work/out.log" \
    || fail "the assumed device is not named: $(tail -3 "$work/out.log")"
  grep -q "memory plan of this rank" "$work/out.log" || fail "no memory plan: $(cat "$work/out.log")"
  run 1 "dry run: does not fit" configs/demo_gpu.ini "${data[@]}" train.micro_batch=1024 \
    train.global_batch=1024 --dry-run
fi
run 0 "dry run: fits" configs/demo_gpu.ini "${data[@]}" --dry-run --device-memory h200
grep -qF "(150754820096 bytes; --device-memory h200: an H200 141 GB (143771 MiB))" "$work/out.log" || fail "h200: $(tail -2 "$work/out.log")"
run 0 "dry run: fits" configs/demo_gpu.ini "${data[@]}" --dry-run --device-memory=141GB
run 0 "dry run: fits" configs/demo_gpu.ini "${data[@]}" --dry-run --device-memory 8GiB
run 1 "the device memory is 100 MiB (104857600 bytes; --device-memory 100MiB)" \
  configs/demo_gpu.ini "${data[@]}" --dry-run --device-memory 100MiB
grep -qF "dry run: does not fit: the memory plan of this rank needs" "$work/out.log" \
  || fail "does not fit: $(tail -2 "$work/out.log")"
# The micro-batch of 1024 x 512 tokens: over 80 GiB, under 141 GB? The plan decides both ways.
run 1 "dry run: does not fit" configs/demo_gpu.ini "${data[@]}" train.micro_batch=1024 \
  train.global_batch=1024 --dry-run --device-memory h100
run 0 "dry run: fits" configs/demo_gpu.ini "${data[@]}" train.micro_batch=1024 \
  train.global_batch=1024 --dry-run --device-memory 1TiB
# 3. A CPU run: the stated memory instead of the host's MemAvailable.
run 1 "dry run: does not fit" configs/tiny_cpu.ini "${data[@]}" --dry-run --device-memory 1MiB
run 0 "dry run: fits" configs/tiny_cpu.ini "${data[@]}" --dry-run --device-memory 64GiB
# 4. Bad input.
run 2 "--device-memory 'lots': expected a size" configs/demo_gpu.ini --dry-run --device-memory lots
run 2 "--device-memory '0GiB': expected a size" configs/demo_gpu.ini --dry-run --device-memory 0GiB
run 2 "--device-memory plans a dry run: add --dry-run" configs/demo_gpu.ini --device-memory h100
# 5. A cluster config planned from one process.
run 0 "dry run: fits" configs/tr11_bloom_176b.ini --dry-run --world 384 --device-memory 80GiB
[[ $(grep -c "pipeline stage [0-9]* of 12 (tp 4 x pp 12 x dp 8)" "$work/out.log") == 12 ]] \
  || fail "not every stage planned: $(grep "pipeline stage" "$work/out.log")"
grep -q "memory plan of the largest stage (0, micro_batch 2)" "$work/out.log" \
  || fail "no largest stage: $(tail -12 "$work/out.log")"
run 1 "dry run: does not fit" configs/tr11_bloom_176b.ini parallel.zero_stage=0 --dry-run \
  --world 384 --device-memory 80GiB
run 1 "launched ranks are not divisible by tp 4 * pp 12" configs/tr11_bloom_176b.ini --dry-run
run 1 "launched ranks are not divisible by tp 4 * pp 12" configs/tr11_bloom_176b.ini --dry-run \
  --world 24
run 2 "--world plans a dry run: add --dry-run" configs/tr11_bloom_176b.ini --world 384
run 2 "--world '0': expected a rank count >= 1" configs/tr11_bloom_176b.ini --dry-run --world 0
echo "train_dry_run_device_test: OK"
