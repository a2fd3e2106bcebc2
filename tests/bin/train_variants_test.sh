#!/usr/bin/env bash
# The architecture-variant demo configs train (ctest train_variants_test): configs/
# tiny_bloom_cpu.ini (ALiBi, embedding LayerNorm) and configs/tiny_llama_cpu.ini (RMSNorm,
# SwiGLU, rotary, no biases, untied LM head) run 14 steps on the demo corpus and their
# validation loss falls by more than 2 nats from the untrained ln(50257) = 10.8. The LLaMA
# config also runs with grouped-query attention: model.n_kv_heads=2 (two query heads per kv
# head) and model.n_kv_heads=1 (multi-query).
# The corpus comes from scripts/prepare-demo-data.sh (needs the bible-kjv package: skipped,
# exit 77, without it).
# usage: train_variants_test.sh BUILD/bin/train BUILD/bin/preprocess
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
if ! command -v bible >/dev/null 2>&1; then
  echo "SKIP: the demo corpus needs the 'bible' program (apt-get install bible-kjv)"
  exit 77
fi
PREPROCESS=$preprocess scripts/prepare-demo-data.sh > "$work/prepare.log" 2>&1 ||
  fail "prepare-demo-data: $(cat "$work/prepare.log")"
for run in configs/tiny_bloom_cpu.ini configs/tiny_llama_cpu.ini \
  "configs/tiny_llama_cpu.ini model.n_kv_heads=2" "configs/tiny_llama_cpu.ini model.n_kv_heads=1"; do
  read -r config extra <<< "$run"
  # shellcheck disable=SC2086 # extra: zero or one override
  "$train" "$config" $extra train.steps=14 optim.warmup_steps=3 train.eval_interval=14 \
    train.eval_iters=4 train.log_interval=10 train.device=cpu "data.cache_dir=$work" \
    > "$work/train.log" 2>&1 || fail "$config: $(tail -5 "$work/train.log")"
  # done: ... | val loss 10.8553 (step 0) -> 7.1234 (ppl ...)
  read -r before after < <(sed -n 's/.*val loss \([0-9.]*\) (step 0) -> \([0-9.]*\).*/\1 \2/p' \
    "$work/train.log" | tail -1) || fail "$config: no validation losses in $(tail -3 "$work/train.log")"
  echo "$run: val loss $before -> $after"
  awk -v b="$before" -v a="$after" 'BEGIN { exit !(a < b - 2.0) }' ||
    fail "$config: the validation loss fell from $before to $after only (want more than 2)"
done
echo PASS
