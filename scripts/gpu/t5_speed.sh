#!/usr/bin/env bash
# T5-base training speed next to Hugging Face's T5ForConditionalGeneration of the same shape
# (bench/reference/hf_t5.py: eager and torch.compile), in one call on the GPU machine from the
# repo root (bundle in .gpu/, else $BUILD/bin). anvil: bin/train configs/t5_base.ini (32 x 512
# encoder / 114 decoder tokens, bf16), 20 steps on the demo corpus split into sentences and
# tokenized with BERT WordPiece + 100 sentinels; tokens/s (encoder + decoder) of the last logged
# step, and the loss falling over the 20 steps. The target: >= 1.25x the better of HF's
# two (measured earlier: HF eager 115K, compile 223K tokens/s on an H200).
#   scripts/gpu/t5_speed.sh [MODES]     (MODES: default eager,compile)
set -uo pipefail
modes=${1:-eager,compile}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
corpus=.gpu/data/corpus.txt
[[ -f $corpus ]] || corpus=data/demo/kjv.txt
anvil preprocess --input "$corpus" --output-prefix "$work/kjv_t5" \
  --tokenizer-type BertWordPieceLowerCase --vocab-file data/bert/vocab.txt --split-sentences \
  --vocab-extra-ids 100 --workers 8 --no-progress 2>&1 | tail -1
anvil train configs/t5_base.ini "data.paths=$work/kjv_t5_text_sentence" "data.cache_dir=$work" \
  train.steps=20 train.log_interval=5 train.eval_iters=0 optim.warmup_steps=2 train.device=cuda \
  2>&1 | grep -E "step +[0-9]+/20|done|error" | sed 's|^|anvil t5_base: |' | cut -c1-200
python3 bench/reference/hf_t5.py --modes "$modes" --steps 10 --warmup 3 2>&1 |
  grep -E "^hf-|Error"
