#!/usr/bin/env bash
# Finetuning from a pretrained checkpoint vs from scratch, on the GPU machine from the repo root
# (binaries from .gpu/run when the bundle is there, else $BUILD/bin):
#   1. pretrain: a small GPT-2 (GPT-2 BPE, d 256, 4 layers, T 128) for 600 steps on CORPUS (the
#      KJV text: verses without labels) on cuda, saved;
#   2. finetune the testament task (TASK_DIR/testament_{train,dev}.jsonl of
#      scripts/make-testament-task.sh, balanced: chance 0.5) with the linear head at the last
#      token, 300 steps of 32 verses: from that checkpoint and from scratch, the same settings;
#   3. print both dev accuracies; PASS when the pretrained run is above 0.75 and above the
#      run from scratch.
#   scripts/gpu/finetune_pretrained.sh CORPUS TASK_DIR
set -euo pipefail
corpus=${1:?usage: finetune_pretrained.sh CORPUS TASK_DIR}
task=${2:?usage: finetune_pretrained.sh CORPUS TASK_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
bpe=(--tokenizer-type GPT2BPE --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe)
anvil preprocess --input "$corpus" --output-prefix "$work/kjv" "${bpe[@]}" --append-eod \
  --workers 8 --no-progress > /dev/null
cat > "$work/model.ini" <<INI
[model]
max_seq_len = 128
d_model = 256
n_heads = 4
n_layers = 4
[data]
paths = $work/kjv_text_document
seq_len = 128
cache_dir = $work/cache
[tokenizer]
type = GPT2BPE
vocab_file = data/gpt2/encoder.json
merge_file = data/gpt2/vocab.bpe
[train]
micro_batch = 32
global_batch = 32
steps = 600
device = cuda
eval_iters = 0
log_interval = 200
[optim]
lr = 1e-3
warmup_steps = 50
INI
anvil train "$work/model.ini" checkpoint.save="$work/pre" > "$work/pre.log" 2>&1 \
  || { tail -5 "$work/pre.log"; exit 1; }
grep -E "step +600/600" "$work/pre.log"
ft=("$work/model.ini" finetune.head=linear finetune.train_data="$task/testament_train.jsonl"
    finetune.dev_data="$task/testament_dev.jsonl" finetune.labels=old,new train.steps=300
    train.eval_interval=100 train.log_interval=100 optim.lr=1e-4 optim.warmup_steps=20
    model.hidden_dropout=0.1)
anvil finetune "${ft[@]}" checkpoint.load="$work/pre" > "$work/ft_pre.log" 2>&1 \
  || { tail -5 "$work/ft_pre.log"; exit 1; }
anvil finetune "${ft[@]}" > "$work/ft_scratch.log" 2>&1 || { tail -5 "$work/ft_scratch.log"; exit 1; }
acc() { grep -oE "step +300/300 \| dev accuracy [0-9.]+ \([0-9/]+\)" "$1" | tail -1; }
echo "from the pretrained checkpoint: $(acc "$work/ft_pre.log")"
echo "from scratch:                   $(acc "$work/ft_scratch.log")"
a=$(acc "$work/ft_pre.log" | awk '{print $6}')
b=$(acc "$work/ft_scratch.log" | awk '{print $6}')
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0.75 && a > b) }' && echo PASS || echo FAIL
