#!/usr/bin/env bash
# bin/convert for the BLOOM-, LLaMA-, Llama-3- (grouped-query, llama3 rope scaling), Mistral-
# (sliding_window) and Qwen2-style (grouped-query, bias on q/k/v only) GPT variants end to end on
# the CPU (ctest convert_variants_test). For each, a tiny model of that [model] variant trains 3
# steps and is saved; then
#   1. export writes a config.json of that model_type; import then export again gives the same
#      model.safetensors bytes (import is export's exact inverse for anvil's own tensors);
#   2. the [model] section import prints, completed with the run's other sections, finetunes from
#      the import with the first-step loss of finetuning from the original checkpoint (the same
#      weights in the same architecture);
# and a [model] that is no family (rotary with LayerNorm) is refused naming the settings.
# The Qwen2 directory also carries a tokenizer.json and tokenizer_config.json: import keeps them
# with the checkpoint ([tokenizer] type HF), bin/generate runs from it with no tokenizer flags,
# and export writes both files back byte for byte.
# usage: convert_variants_test.sh BUILD/bin/train BUILD/bin/convert [BUILD/bin/generate]
#        (from the repository root; generate defaults to convert's directory; KEEP=1 keeps the
#        work directory)
set -euo pipefail
train=$1
convert=$2
generate=${3:-$(dirname "$convert")/generate}
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
first_loss() { grep -oE 'step 1/1 \| loss [0-9.]+' "$1" | awk '{print $NF}'; }
rest() {  # the run's sections after [model]
  cat <<INI
[data]
paths = tests/io/fixtures/gpt_index/synth_a
seq_len = 16
eod_token = 0
cache_dir = $work/cache
[train]
micro_batch = 2
global_batch = 4
steps = 3
device = cpu
eval_iters = 0
log_interval = 1
[optim]
lr = 1e-2
warmup_steps = 1
INI
}
common="vocab_size = 65535
max_seq_len = 16
d_model = 32
n_heads = 2
n_layers = 2"
declare -A variant=(
  [bloom]="position_embedding = alibi
embed_layernorm = true
activation = gelu
norm = layernorm
bias = true
tie_embeddings = true"
  [llama]="ffn_hidden = 48
position_embedding = rotary
rotary_base = 500000
activation = swiglu
norm = rmsnorm
bias = false
tie_embeddings = false"
  [llama3]="ffn_hidden = 48
n_kv_heads = 1
position_embedding = rotary
rotary_base = 500000
rope_scaling = llama3
rope_scaling_factor = 8
rope_original_max_position = 64
activation = swiglu
norm = rmsnorm
bias = false
tie_embeddings = false"
  [mistral]="ffn_hidden = 48
n_kv_heads = 1
position_embedding = rotary
sliding_window = 16
activation = swiglu
norm = rmsnorm
bias = false
tie_embeddings = false"
  [qwen2]="ffn_hidden = 48
n_kv_heads = 1
position_embedding = rotary
rotary_base = 1000000
activation = swiglu
norm = rmsnorm
bias = false
qkv_bias = true
tie_embeddings = false"
)
declare -A model_type=([bloom]=bloom [llama]=llama [llama3]=llama [mistral]=mistral [qwen2]=qwen2)
for fam in bloom llama llama3 mistral qwen2; do
  d=$work/$fam
  mkdir -p "$d"
  { printf '[model]\n%s\n%s\n' "$common" "${variant[$fam]}"; rest; } > "$d/t.ini"
  "$train" "$d/t.ini" checkpoint.save="$d/ck" > "$d/train.log" 2>&1 \
    || fail "$fam: training failed: $(tail -3 "$d/train.log")"
  "$convert" export "$d/ck" "$d/hf" > "$d/conv.log" 2>&1 || fail "$fam: $(cat "$d/conv.log")"
  grep -q "\"model_type\": \"${model_type[$fam]}\"" "$d/hf/config.json" \
    || fail "$fam: config.json model_type: $(cat "$d/hf/config.json")"
  if [[ $fam == qwen2 ]]; then
    cp tests/io/fixtures/tokenizers/gpt2_tokenizer.json "$d/hf/tokenizer.json"
    printf '{"chat_template": "{%% for m in messages %%}{{ m.content }}{%% endfor %%}"}\n' \
      > "$d/hf/tokenizer_config.json"
  fi
  "$convert" import "$d/hf" "$d/imp" > "$d/imp.log" 2>&1 || fail "$fam: $(cat "$d/imp.log")"
  "$convert" export "$d/imp" "$d/hf2" >> "$d/conv.log" 2>&1 || fail "$fam: $(cat "$d/conv.log")"
  cmp "$d/hf/model.safetensors" "$d/hf2/model.safetensors" \
    || fail "$fam: export-import-export differs"
  case $fam in
    llama3) grep -q '"rope_type": "llama3"' "$d/hf/config.json" && grep -q '"num_key_value_heads": 1' \
      "$d/hf/config.json" || fail "llama3: config.json: $(cat "$d/hf/config.json")" ;;
    mistral) grep -q '"sliding_window": 16' "$d/hf/config.json" || fail "mistral: sliding_window" ;;
    qwen2) grep -q 'q_proj.bias' "$d/hf/model.safetensors" || fail "qwen2: no q_proj.bias"
      for f in tokenizer.json tokenizer_config.json; do
        cmp "$d/hf/$f" "$d/imp/step_00000000/tokenizer/$f" || fail "qwen2: $f not kept"
        cmp "$d/hf/$f" "$d/hf2/$f" || fail "qwen2: $f not exported back"
      done
      "$generate" "$d/imp" --prompt "Hello" --max-new-tokens 3 --greedy > "$d/gen.log" 2>&1 \
        || fail "qwen2: generate from the import without tokenizer flags: $(tail -3 "$d/gen.log")"
      ;;
  esac
  # [tokenizer] of the import (its path) is left to the run's own sections.
  { sed -n '/^\[model\]/,/^\[tokenizer\]/p' "$d/imp.log" | grep -v '^\[tokenizer\]'; rest; } \
    > "$d/imported.ini"
  ft=(checkpoint.finetune=true train.steps=1 optim.warmup_steps=0 optim.decay_style=constant)
  "$train" "$d/t.ini" checkpoint.load="$d/ck" "${ft[@]}" > "$d/ft_a.log" 2>&1 \
    || fail "$fam: finetune from the checkpoint: $(tail -3 "$d/ft_a.log")"
  "$train" "$d/imported.ini" checkpoint.load="$d/imp" "${ft[@]}" > "$d/ft_b.log" 2>&1 \
    || fail "$fam: finetune from the import: $(tail -3 "$d/ft_b.log")"
  a=$(first_loss "$d/ft_a.log")
  b=$(first_loss "$d/ft_b.log")
  echo "$fam: first-step loss from the checkpoint $a, from the import $b"
  [[ -n $a && $a == "$b" ]] || fail "$fam: the import trains differently"
done
# The sliding window is not implemented: a run longer than it is refused, naming both.
"$train" "$work/mistral/t.ini" model.sliding_window=8 --dry-run > "$work/sw.log" 2>&1 \
  && fail "a seq_len 16 run with sliding_window 8 was accepted"
grep -q "seq_len.*16 exceeds \[model\] sliding_window 8" "$work/sw.log" \
  || fail "no sliding_window error: $(cat "$work/sw.log")"
# Rotary with LayerNorm is none of GPT-2, BLOOM, LLaMA.
{ printf '[model]\n%s\nposition_embedding = rotary\n' "$common"; rest; } > "$work/odd.ini"
"$train" "$work/odd.ini" train.steps=1 optim.warmup_steps=0 checkpoint.save="$work/odd" > "$work/odd.log" 2>&1 \
  || fail "odd model: $(tail -3 "$work/odd.log")"
"$convert" export "$work/odd" "$work/odd_hf" > "$work/odd_conv.log" 2>&1 \
  && fail "export of a rotary LayerNorm model succeeded"
grep -q "none of the Hugging Face families anvil converts: gpt2 needs position_embedding = learned" \
  "$work/odd_conv.log" || fail "no family error: $(cat "$work/odd_conv.log")"
echo "PASS convert_variants_test"
