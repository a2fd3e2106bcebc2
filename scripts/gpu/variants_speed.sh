#!/usr/bin/env bash
# Training speed of the BLOOM- and LLaMA-style configs next to Hugging Face's models of the same
# shape (bench/reference/hf_causal_lm.py: eager and torch.compile), in one call on the GPU
# machine from the repo root (bundle in .gpu/). anvil: bin/train, 8 steps of one micro-batch
# B x T on the demo corpus tokenized with the Byte tokenizer (ids < 257 fit every vocabulary:
# data/demo/kjv_byte_text_document from bin/preprocess --tokenizer-type Byte), tokens/s of the
# last logged step. Shapes: configs/bloom_560m.ini (B 8 x T 2048), configs/llama_1b.ini
# (B 8 x T 2048).
#   scripts/gpu/variants_speed.sh [MODES]     (MODES: default eager,compile)
set -uo pipefail
modes=${1:-eager,compile}
data=data/demo/kjv_byte_text_document
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
anvil_speed() {  # CONFIG
  .gpu/run train "$1" "data.paths=$data" "data.cache_dir=$cache" data.eod_token=256 \
    train.steps=8 train.micro_batch=8 train.global_batch=8 train.eval_iters=0 \
    train.log_interval=1 optim.warmup_steps=1 train.device=cuda 2>&1 |
    grep -E "step +8/8|error" | sed "s|^|anvil $(basename "$1" .ini): |" | cut -c1-220
}
anvil_speed configs/bloom_560m.ini
python3 bench/reference/hf_causal_lm.py --family bloom --layers 24 --d 1024 --heads 16 \
  --vocab 250880 --B 8 --T 2048 --steps 8 --warmup 3 --modes "$modes" 2>&1 | grep -E "^hf-|Error"
anvil_speed configs/llama_1b.ini
python3 bench/reference/hf_causal_lm.py --family llama --layers 22 --d 2048 --heads 32 \
  --ffn 5632 --vocab 32000 --B 8 --T 2048 --steps 8 --warmup 3 --modes "$modes" 2>&1 |
  grep -E "^hf-|Error"
