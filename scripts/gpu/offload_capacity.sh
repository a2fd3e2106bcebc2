#!/usr/bin/env bash
# Optimizer offload ([parallel] offload_optimizer, docs/parallelism.md) on one GPU, in one call
# on the GPU machine from the repo root (bundle in .gpu/ with train and preprocess:
# scripts/gpu/bundle.sh .gpu build/bin/train build/bin/preprocess). Data: random text in Byte
# tokens, written by the script into $OUT on first use (the step time does not depend on it):
#   1. capacity: a ladder of GPT shapes (bf16, seq_len 2048, micro_batch 1, full recompute,
#      flash attention), each trained 3 steps without and with offload until the first that does
#      not fit (the memory plan refuses it before allocating, or an allocation fails): the
#      largest GPT that trains each way, with its GPU plan, pinned host bytes and tokens/s;
#   2. cost: 1.3B (24 layers, d 2048, 16 heads) at micro_batch 8 x 2048 tokens, 6 steps each
#      way: tokens/s of the last step and the ratio.
# Host memory bounds the offloaded sizes too (18 bytes of pinned host memory per parameter:
# f32 master, m, v, gradient staging, bf16 parameter staging).
#   scripts/gpu/offload_capacity.sh [LADDER]   (LADDER: names from the table below, default all;
#                                              SKIP_COST=1: the capacity ladder only;
#                                              MODES="true": the ladder with offload only)
# Logs go to $OUT (default /tmp/anvil-offload).
set -uo pipefail
out=${OUT:-/tmp/anvil-offload}
mkdir -p "$out"
data=$out/rand_text_document
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
if [[ ! -f $data.bin ]]; then
  python3 -c '
import base64, json, random
r = random.Random(1)
for _ in range(4000):
    print(json.dumps({"text": base64.b64encode(r.randbytes(2400)).decode()}))' > "$out/rand.jsonl"
  .gpu/run preprocess --no-progress --input "$out/rand.jsonl" --tokenizer-type Byte \
    --output-prefix "$out/rand" > "$out/preprocess.log" 2>&1 || { cat "$out/preprocess.log"; exit 1; }
fi
# name layers d_model heads
ladder="1p3B 24 2048 16
2p7B 32 2560 32
4B 36 3072 32
6p7B 32 4096 32
9B 40 4352 34
13B 40 5120 40
20B 44 6144 48
30B 60 6656 52"
if [[ $# -gt 0 ]]; then ladder=$(grep -E "^($(echo "$*" | tr ' ' '|')) " <<< "$ladder"); fi
train() {  # train LOG LAYERS D HEADS OFFLOAD MICRO STEPS
  .gpu/run train configs/demo_gpu.ini "data.paths=$data" "data.cache_dir=$cache" \
    data.seq_len=2048 model.max_seq_len=2048 model.vocab_size=50257 \
    model.hidden_dropout=0 model.attention_dropout=0 "model.n_layers=$2" "model.d_model=$3" \
    "model.n_heads=$4" "parallel.offload_optimizer=$5" parallel.recompute=full \
    "train.micro_batch=$6" "train.global_batch=$6" "train.steps=$7" train.eval_iters=0 \
    train.log_interval=1 optim.warmup_steps=1 train.device=cuda > "$1" 2>&1
}
last_step() { grep -E "step +[0-9]+/[0-9]+ \|" "$1" | tail -1 | grep -oE "[0-9.]+[kM]? tok/s"; }
echo "| shape | params | offload | trains | tokens/s | plan total | pinned host | GPU used |" | tee "$out/table.md"
echo "|---|---|---|---|---|---|---|---|" | tee -a "$out/table.md"
for offload in ${MODES:-false true}; do
  while read -r name layers d heads; do
    [[ -n "$name" ]] || continue
    log="$out/${name}_offload_${offload}.log"
    train "$log" "$layers" "$d" "$heads" "$offload" 1 3
    params=$(grep -oE "[0-9.]+[KMB] parameters" "$log" | head -1)
    plan=$(grep -A30 "memory plan of this rank" "$log" | grep -E "^ *total " | head -1 | awk '{print $2" MiB"}')
    # bin/train logs the pinned host bytes on their own line, outside the GPU plan.
    host=$(grep -oE "offload_optimizer\): [0-9.]+ [KMGT]?i?B" "$log" | head -1 | sed 's/.*: //')
    used=$(grep -oE "GPU used [0-9.]+ [MG]iB" "$log" | tail -1 | cut -d' ' -f3-)
    if grep -qE "step +3/3 \|" "$log"; then ok=yes; else ok=no; fi
    echo "| $name | ${params:-?} | $offload | $ok | $(last_step "$log") | ${plan:-?} | ${host:--} | ${used:-?} |" |
      tee -a "$out/table.md"
    [[ $ok == yes ]] || { grep -m1 -E "error|out of memory" "$log" | cut -c1-300; break; }
  done <<< "$ladder"
done
for offload in false true; do
  [[ -z ${SKIP_COST:-} ]] || break
  train "$out/1p3B_B8_offload_$offload.log" 24 2048 16 "$offload" 8 6
  echo "1.3B B8 x 2048 offload=$offload: $(last_step "$out/1p3B_B8_offload_$offload.log")" |
    tee -a "$out/table.md"
done
