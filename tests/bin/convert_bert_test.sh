#!/usr/bin/env bash
# bin/convert for BERT end to end on the CPU (ctest convert_bert_test): the tiny HF-layout BERT
# of tests/bin/fixtures/tiny_bert.ini trains 3 steps and is saved; then
#   1. export writes a BertForPreTraining config.json and HF's tensor names (q/k/v apart, the
#      heads under cls.) and the WordPiece vocab.txt; import then export again gives the same
#      model.safetensors bytes;
#   2. the [model] section import prints, completed with the run's other sections, finetunes
#      from the import with the first-step loss (and lm / sop parts) of finetuning from the
#      original checkpoint;
# and Megatron's pre-LN BERT is refused naming norm_placement.
# usage: convert_bert_test.sh BUILD/bin/train BUILD/bin/convert   (from the repository root)
set -euo pipefail
train=$1
convert=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
fx=tests/io/fixtures/bert_t5
ini=tests/bin/fixtures/tiny_bert.ini
rest() { sed -n '/^\[tokenizer\]/,$p' $ini; } # the run's sections after [model]
cp $ini "$work/t.ini"
cache=("data.cache_dir=$work/cache")
"$train" "$work/t.ini" "${cache[@]}" checkpoint.save="$work/ck" > "$work/train.log" 2>&1 ||
  fail "training failed: $(tail -3 "$work/train.log")"
"$convert" export "$work/ck" "$work/hf" > "$work/conv.log" 2>&1 || fail "$(cat "$work/conv.log")"
grep -q '"model_type": "bert"' "$work/hf/config.json" || fail "config.json model_type"
grep -q '"BertForPreTraining"' "$work/hf/config.json" || fail "config.json architectures"
for name in bert.encoder.layer.1.attention.self.key.weight cls.predictions.bias \
  cls.seq_relationship.weight bert.embeddings.token_type_embeddings.weight; do
  grep -aq "\"$name\"" "$work/hf/model.safetensors" || fail "no $name in model.safetensors"
done
cmp "$work/hf/vocab.txt" $fx/vocab.txt || fail "vocab.txt is not the tokenizer's"
grep -q '"tokenizer_class": "BertTokenizer"' "$work/hf/tokenizer_config.json" ||
  fail "tokenizer_config.json: $(cat "$work/hf/tokenizer_config.json")"
"$convert" import "$work/hf" "$work/imp" > "$work/imp.log" 2>&1 || fail "$(cat "$work/imp.log")"
"$convert" export "$work/imp" "$work/hf2" >> "$work/conv.log" 2>&1 || fail "$(cat "$work/conv.log")"
cmp "$work/hf/model.safetensors" "$work/hf2/model.safetensors" ||
  fail "export-import-export differs"
{
  sed -n '/^\[model\]/,$p' "$work/imp.log"
  rest
} > "$work/imported.ini"
ft=("${cache[@]}" checkpoint.finetune=true train.steps=1 optim.warmup_steps=0
  optim.decay_style=constant)
"$train" "$work/t.ini" checkpoint.load="$work/ck" "${ft[@]}" > "$work/ft_a.log" 2>&1 ||
  fail "finetune from the checkpoint: $(tail -3 "$work/ft_a.log")"
"$train" "$work/imported.ini" checkpoint.load="$work/imp" "${ft[@]}" > "$work/ft_b.log" 2>&1 ||
  fail "finetune from the import: $(tail -3 "$work/ft_b.log")"
# step 1/1 | loss 5.1234 | lm loss 4.4321 | sop loss 0.6913 | lr ...
first() { grep -oE 'step 1/1 \| loss [0-9.]+ \| lm loss [0-9.]+ \| sop loss [0-9.]+' "$1"; }
a=$(first "$work/ft_a.log")
b=$(first "$work/ft_b.log")
echo "from the checkpoint: $a; from the import: $b"
[[ -n $a && $a == "$b" ]] || fail "the import trains differently"

# Megatron's BERT layout has no HF family.
"$train" "$work/t.ini" "${cache[@]}" model.norm_placement=pre train.steps=1 \
  optim.warmup_steps=0 checkpoint.save="$work/pre" > "$work/pre.log" 2>&1 ||
  fail "pre-LN training: $(tail -3 "$work/pre.log")"
if "$convert" export "$work/pre" "$work/hf_pre" > "$work/pre_conv.log" 2>&1; then
  fail "a pre-LN BERT was exported"
fi
grep -q "bert needs norm_placement = post, got pre" "$work/pre_conv.log" ||
  fail "refusal does not name norm_placement: $(cat "$work/pre_conv.log")"
echo "PASS"
