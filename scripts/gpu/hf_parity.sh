#!/usr/bin/env bash
# Hugging Face GPT-2 parity of bin/convert, on the GPU machine from the repo root (needs torch
# and transformers; binaries from .gpu/run when the bundle is there, else $BUILD/bin):
#   1. export: anvil trains a small GPT-2 (bf16 on the GPU) on a one-document corpus, exports it;
#      GPT2LMHeadModel.from_pretrained computes the loss of the training sample in float32;
#   2. import: a random GPT2LMHeadModel (std 0.2, so the loss depends on every weight) is
#      imported; anvil finetunes from it and logs its first step's loss (before any update);
#   3. tokenizer: a run with [tokenizer] GPT2BPE is exported; AutoTokenizer.from_pretrained on
#      the export encodes a text to the ids bin/preprocess gave it.
# Both directions print anvil's and HF's loss on the same sample; they must agree within
# 0.02 + 2% (bf16 activations in anvil, vocabulary 500 padded to 512 in anvil).
#   scripts/gpu/hf_parity.sh
set -euo pipefail
py=tests/parity/hf_gpt2_parity.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
python3 "$py" make-data "$work/data"
cat > "$work/t.ini" <<INI
[model]
vocab_size = 500
max_seq_len = 64
d_model = 128
n_heads = 4
n_layers = 2
hidden_dropout = 0.0
attention_dropout = 0.0
[data]
paths = $work/data
seq_len = 64
eod_token = 0
cache_dir = $work/cache
[train]
micro_batch = 4
global_batch = 4
steps = 30
device = cuda
eval_iters = 0
log_interval = 1
[optim]
lr = 3e-3
warmup_steps = 3
INI
# anvil's loss of step 1 after loading DIR (weights only): the forward before any update.
first_loss() {
  anvil train "$work/t.ini" checkpoint.load="$1" checkpoint.finetune=true train.steps=1 \
    optim.warmup_steps=0 optim.decay_style=constant 2>&1 | tee "$work/first.log" |
    grep -oE 'step 1/1 \| loss [0-9.]+' | awk '{print $NF}'
}
check() {  # name anvil_loss hf_loss
  echo "$1: anvil loss $2, HF loss $3"
  python3 -c "import sys; a, h = $2, $3; sys.exit(0 if abs(a - h) <= 0.02 + 0.02 * abs(h) else 1)" \
    || { echo "FAIL $1"; exit 1; }
}
anvil train "$work/t.ini" checkpoint.save="$work/ck" > "$work/train.log" 2>&1 \
  || { tail -5 "$work/train.log"; exit 1; }
grep -E 'step +30/30' "$work/train.log"
anvil convert export "$work/ck" "$work/hf"
check export "$(first_loss "$work/ck")" "$(python3 "$py" hf-loss "$work/hf" "$work/data")"
python3 "$py" make-hf "$work/hf_random"
anvil convert import "$work/hf_random" "$work/imported"
check import "$(first_loss "$work/imported")" "$(python3 "$py" hf-loss "$work/hf_random" "$work/data")"
for i in 1 2 3 4 5 6 7 8; do printf 'Checkpoints travel with their tokenizer, %d times.\n\n' "$i"; done \
  > "$work/tok.txt"
anvil preprocess --input "$work/tok.txt" --output-prefix "$work/tok" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 1 \
  --no-progress
sed -i '/^vocab_size/d; /^eod_token/d; s/^seq_len = 64/seq_len = 16/' "$work/t.ini"
anvil train "$work/t.ini" data.paths="$work/tok_text_document" tokenizer.type=GPT2BPE \
  tokenizer.vocab_file=data/gpt2/encoder.json tokenizer.merge_file=data/gpt2/vocab.bpe \
  train.steps=2 optim.warmup_steps=1 checkpoint.save="$work/tokck" > "$work/tok.log" 2>&1 \
  || { tail -5 "$work/tok.log"; exit 1; }
anvil convert export "$work/tokck" "$work/tokhf"
python3 "$py" tok-check "$work/tokhf" "$work/tok_text_document" "$work/tok.txt"
echo "PASS hf_parity"
