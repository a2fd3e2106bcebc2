#!/usr/bin/env bash
# The command lines of bin/generate and bin/eval do what they are asked (ctest
# inference_cli_test, CPU):
#   1. configs/tiny_cpu.ini (the `make demo` config, shrunk by overrides to a 1-layer model and a
#      small corpus) records its tokenizer in the checkpoint: bin/generate and bin/eval --text
#      run on it with no tokenizer flags;
#   2. bin/generate --prompt X --output F writes the completion to F (and nothing to stdout);
#      an --output in a missing directory is an error that leaves no file behind;
#   3. bin/eval: --stride 0 and -5, --seq-len -1 and 0 are errors naming the flag and the limit
#      (they used to run with the defaults); a 100 kB value is cut in the message;
#   4. bin/eval --data on a checkpoint without [tokenizer] runs: token ids need no tokenizer.
# usage: inference_cli_test.sh BUILD/bin/train BUILD/bin/preprocess BUILD/bin/generate
#        BUILD/bin/eval   (from the repository root)
set -euo pipefail
train=$1
preprocess=$2
generate=$3
eval_bin=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for i in $(seq 30); do printf 'In the beginning %d was the word, and the word was %d.\n\n' "$i" "$i"; done \
  > "$work/corpus.txt"
"$preprocess" --input "$work/corpus.txt" --output-prefix "$work/gpt2" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 1 \
  --no-progress > "$work/pre.log" 2>&1 || fail "preprocess: $(tail -2 "$work/pre.log")"
small=(model.n_layers=1 model.d_model=64 model.n_heads=2 model.max_seq_len=32 data.seq_len=32
  data.paths="$work/gpt2_text_document" data.cache_dir="$work/cache" data.split=80,20,0
  train.steps=2 train.micro_batch=2 train.global_batch=2 train.device=cpu train.eval_iters=0
  train.eval_interval=0 optim.warmup_steps=1)

# 1. The demo config's checkpoint needs no tokenizer flags.
"$train" configs/tiny_cpu.ini "${small[@]}" checkpoint.save="$work/demo" > "$work/train.log" 2>&1 \
  || fail "train configs/tiny_cpu.ini: $(tail -3 "$work/train.log")"
"$generate" "$work/demo" --prompt "In the beginning" --max-new-tokens 3 --greedy \
  > "$work/g.txt" 2> "$work/g.err" || fail "generate on the demo checkpoint: $(cat "$work/g.err")"
grep -q "^In the beginning" "$work/g.txt" || fail "generate output: $(cat "$work/g.txt")"
printf 'In the beginning 3 was the word.\n' > "$work/one.txt"
"$eval_bin" "$work/demo" --text "$work/one.txt" --detokenize none > "$work/e.txt" 2> "$work/e.err" \
  || fail "eval --text on the demo checkpoint: $(cat "$work/e.err")"
grep -q "tokenizer GPT2BPE" "$work/e.txt" || fail "eval names no GPT2BPE tokenizer: $(cat "$work/e.txt")"

# 2. --prompt with --output.
"$generate" "$work/demo" --prompt "In the beginning" --max-new-tokens 3 --greedy \
  --output "$work/out.txt" > "$work/stdout.txt" 2> "$work/o.err" \
  || fail "generate --output: $(cat "$work/o.err")"
[[ -s $work/out.txt ]] || fail "--prompt --output did not write the file"
cmp -s "$work/out.txt" "$work/g.txt" || fail "--output holds $(cat "$work/out.txt"), stdout had $(cat "$work/g.txt")"
[[ ! -s $work/stdout.txt ]] || fail "--output also printed: $(cat "$work/stdout.txt")"
if "$generate" "$work/demo" --prompt "In" --max-new-tokens 1 --output "$work/no/such/dir/f" \
  > /dev/null 2> "$work/o2.err"; then
  fail "--output into a missing directory succeeded"
fi
grep -q "$work/no/such/dir/f: cannot write" "$work/o2.err" || fail "--output error: $(cat "$work/o2.err")"
[[ -z $(ls "$work"/no 2>/dev/null) ]] || fail "files left behind"

# 3. bin/eval's flags.
# refused PATTERN ARGS...: bin/eval ARGS exits 2 with PATTERN in its message.
refused() {
  local pattern=$1 rc=0
  shift
  timeout 60 "$eval_bin" "$@" > "$work/r.out" 2> "$work/r.err" || rc=$?
  local args="$*"
  args=${args:0:200}
  [[ $rc == 2 ]] || fail "eval $args exited $rc, expected 2: $(head -c 300 "$work/r.err")"
  grep -qF -- "$pattern" "$work/r.err" || fail "eval $args: no '$pattern' in: $(head -c 300 "$work/r.err")"
}
data=$work/gpt2_text_document
refused "--stride must be >= 1, got 0" "$work/demo" --data "$data" --stride 0
refused "--stride must be >= 1, got -5" "$work/demo" --data "$data" --stride -5
refused "--seq-len must be >= 1, got -1" "$work/demo" --data "$data" --seq-len -1
refused "--seq-len must be >= 1, got 0" "$work/demo" --data "$data" --seq-len 0
huge=$(head -c 100000 /dev/zero | tr '\0' 7)  # (one argument may hold at most 128 KiB)
refused "--stride 'x${huge:0:63}...': expected an integer" "$work/demo" --data "$data" --stride "x$huge"
[[ $(head -1 "$work/r.err" | wc -c) -lt 200 ]] || fail "the 100 kB value is not cut: $(head -c 300 "$work/r.err")"

# 4. --data without a tokenizer in the checkpoint.
"$train" configs/tiny_cpu.ini "${small[@]}" tokenizer.type= tokenizer.vocab_file= \
  tokenizer.merge_file= checkpoint.save="$work/plain" > "$work/train2.log" 2>&1 \
  || fail "train without [tokenizer]: $(tail -3 "$work/train2.log")"
"$eval_bin" "$work/plain" --data "$data" > "$work/d.txt" 2> "$work/d.err" \
  || fail "eval --data without a tokenizer: $(cat "$work/d.err")"
grep -qE "^data .* \| loss [0-9.]+" "$work/d.txt" || fail "eval --data output: $(cat "$work/d.txt")"
echo "inference_cli_test: OK"
