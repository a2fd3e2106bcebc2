#!/usr/bin/env bash
# Packed T0/MTF finetuning ([data] mtf) trained on CUDA against the CPU twin, in one call on the
# GPU machine from the repo root (bundle in .gpu/ with train and preprocess):
#   1. bin/preprocess --json-keys inputs targets on 4000 pairs "a+b=" -> "c;" (Byte tokens);
#   2. a 4-layer GPT (ALiBi, 4 heads of 64, rows of 257 tokens, pad 0) trained 5 steps on the
#      CPU and on CUDA (bf16, flash attention with segments and per-query prefix ends): each
#      step's loss within 2% of the CPU's;
#   3. the same on CUDA for 150 steps: the loss of the last 10 steps below half the first.
#   scripts/gpu/mtf_check.sh          (logs in $OUT, default /tmp/anvil-mtf; prints PASS / FAIL)
set -uo pipefail
out=${OUT:-/tmp/anvil-mtf}
mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
python3 -c '
import json, random
r = random.Random(3)
for _ in range(4000):
    a, b = r.randrange(1000), r.randrange(1000)
    print(json.dumps({"inputs": "%d+%d=" % (a, b), "targets": "%d;" % (a + b)}))' \
  > "$out/pairs.jsonl"
.gpu/run preprocess --no-progress --input "$out/pairs.jsonl" --json-keys inputs targets \
  --tokenizer-type Byte --output-prefix "$out/mtf" > "$out/preprocess.log" 2>&1 \
  || fail "preprocess: $(tail -3 "$out/preprocess.log")"
cat > "$out/mtf.ini" <<INI
[model]
vocab_size = 257
max_seq_len = 256
d_model = 256
n_heads = 4
n_layers = 4
position_embedding = alibi
hidden_dropout = 0
attention_dropout = 0
[data]
paths = $out/mtf
mtf = true
pad_token = 0
seq_len = 256
split = 969,30,1
cache_dir = $out/cache
[train]
micro_batch = 16
global_batch = 32
eval_iters = 0
log_interval = 1
[optim]
lr = 1e-3
warmup_steps = 10
decay_steps = 150
INI
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | awk '{print $NF}'; }
for dev in cpu cuda; do
  .gpu/run train "$out/mtf.ini" train.device=$dev train.steps=5 > "$out/$dev.log" 2>&1 \
    || fail "5 steps on $dev: $(tail -3 "$out/$dev.log")"
done
grep -m1 'data (MTF)' "$out/cuda.log"
paste <(losses "$out/cpu.log") <(losses "$out/cuda.log") | tee "$out/first.txt"
[[ $(wc -l < "$out/first.txt") == 5 ]] || fail "expected 5 loss lines each"
awk '{d = $1 - $2; if (d < 0) d = -d; if (!(d <= 0.02 * $1)) bad = 1} END {exit bad}' \
  "$out/first.txt" || fail "a CUDA loss differs from the CPU's by more than 2%"
.gpu/run train "$out/mtf.ini" train.device=cuda train.steps=150 train.log_interval=10 \
  > "$out/long.log" 2>&1 || fail "150 steps on cuda: $(tail -3 "$out/long.log")"
grep -E 'step +(10|50|100|150)/' "$out/long.log" | cut -c1-150
first=$(losses "$out/cuda.log" | head -1)
last=$(losses "$out/long.log" | tail -1)
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.5 * f) }' \
  || fail "loss did not fall on cuda: step 1 $first, step 150 $last"
echo "PASS mtf on cuda: step 1 $first, step 150 $last"
