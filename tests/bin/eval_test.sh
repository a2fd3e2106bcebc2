#!/usr/bin/env bash
# bin/eval end to end on the CPU (ctest eval_bin_test), on a byte-level model trained for 150
# steps on a repetitive corpus by bin/train (its [tokenizer] Byte kept in the checkpoint):
#   1. --data over the training set: a loss far below the untrained ln(257) = 5.55;
#   2. the same tokens through --text (detokenizer none) and --data give the same loss, tokens
#      and windows; --batch 1 and 8 agree; the JSON line holds every number;
#   3. --text with the wikitext detokenizer reports Megatron's word count and adjusted ppl;
#   4. --lambada: strict and non-strict run; a context the model learnt predicts its last word
#      (accuracy 1), a shuffled last word is wrong (accuracy 0);
#   4b. [eval] in bin/train: text and LAMBADA lines at every evaluation;
#   4c. with $MPIRUN: bin/eval --tp 2, --pp 2, dp 2 (2 ranks) and --tp 2 --pp 2 (4 ranks) give
#       the one-rank loss (f32 sums in another order: 1e-5 relative), windows and LAMBADA
#       accuracy; bin/train's [eval] under TP2, PP2 and DP2 with ZeRO-3 (the DP ranks split
#       the windows, their forwards gather parameters together) logs the one-rank step-0 loss;
#   5. bad input: no task, a missing checkpoint, bad JSONL (file:line), stride > seq_len,
#      --seq-len above max_seq_len, invalid UTF-8, --tp 0, a layout larger than the launch:
#      exit status 1 or 2 with a message.
# usage: [MPIRUN="mpirun ..."] eval_test.sh BUILD/bin/eval BUILD/bin/train BUILD/bin/preprocess
#        (from the repo root)
set -euo pipefail
eval_bin=$1
train=$2
preprocess=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# num KEY JSONFILE: the first number of "KEY": in a JSON line (flat enough for grep).
num() { grep -oE "\"$1\":[-0-9.e+]+" "$2" | head -1 | cut -d: -f2; }
# lt A B: A < B as floats.
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

for i in $(seq 0 199); do
  printf '{"text": "number %d: the dog ran home."}\n' "$i"
done > "$work/d.jsonl"
"$preprocess" --no-progress --input "$work/d.jsonl" --tokenizer-type Byte --append-eod \
  --output-prefix "$work/d" > "$work/pre.log" 2>&1 || fail "preprocess: $(cat "$work/pre.log")"
cat > "$work/t.ini" <<INI
[model]
max_seq_len = 32
d_model = 32
n_heads = 2
n_layers = 2
[data]
paths = $work/d_text_document
seq_len = 32
cache_dir = $work/cache
[tokenizer]
type = Byte
[train]
micro_batch = 4
global_batch = 4
steps = 150
device = cpu
eval_iters = 0
log_interval = 20
[optim]
lr = 1e-2
warmup_steps = 5
INI
"$train" "$work/t.ini" checkpoint.save="$work/ck" > "$work/train.log" 2>&1 \
  || fail "train: $(tail -3 "$work/train.log")"

# 1. The training data.
"$eval_bin" "$work/ck" --data "$work/d_text_document" --json > "$work/data.out" 2> "$work/data.err" \
  || fail "eval --data: $(cat "$work/data.err")"
tail -1 "$work/data.out" > "$work/data.json"
loss=$(num loss "$work/data.json")
lt "$loss" 2.5 || fail "training-data loss $loss, expected < 2.5 after training"
grep -q "eval: data: .* windows" "$work/data.err" || fail "no progress lines"

# 2. One document as text and as a dataset: the same tokens, the same numbers.
text="the cat sat on the mat number 7 and the dog ran. the cat sat on the mat number 8."
printf '%s' "$text" > "$work/one.txt"
printf '{"text": "%s"}\n' "$text" > "$work/one.jsonl"
"$preprocess" --no-progress --input "$work/one.jsonl" --tokenizer-type Byte \
  --output-prefix "$work/one" > "$work/pre1.log" 2>&1 || fail "preprocess one: $(cat "$work/pre1.log")"
"$eval_bin" "$work/ck" --text "$work/one.txt" --detokenize none --stride 8 --json \
  > "$work/t.out" 2> "$work/t.err" || fail "eval --text: $(cat "$work/t.err")"
"$eval_bin" "$work/ck" --data "$work/one_text_document" --stride 8 --batch 1 --json \
  > "$work/d.out" 2> "$work/d.err" || fail "eval --data one: $(cat "$work/d.err")"
tail -1 "$work/t.out" | grep -o '"text":{[^}]*}' > "$work/t.json"
tail -1 "$work/d.out" | grep -o '"data":{[^}]*}' > "$work/d.json"
for k in tokens windows; do
  [[ $(num $k "$work/t.json") == $(num $k "$work/d.json") ]] \
    || fail "$k: --text $(num $k "$work/t.json") vs --data $(num $k "$work/d.json")"
done
# Equal to f32 rounding (micro-batch 8 vs 1: other GEMM shapes).
awk -v a="$(num loss "$work/t.json")" -v b="$(num loss "$work/d.json")" \
  'BEGIN { d = a - b; exit !(d < 1e-6 * a && -d < 1e-6 * a) }' \
  || fail "loss: --text $(num loss "$work/t.json") vs --data $(num loss "$work/d.json")"
[[ $(num tokens "$work/t.json") == $((${#text} - 1)) ]] || fail "tokens counted: $(cat "$work/t.json")"
# Megatron: windows = ceil((N - 1 - stride) / stride) + 1 with N = 81 bytes, stride 8: 10.
[[ $(num windows "$work/t.json") == 10 ]] || fail "windows: $(cat "$work/t.json")"
[[ $(num words "$work/t.json") == 20 ]] || fail "words: $(cat "$work/t.json")"

# 3. The wikitext detokenizer and the adjusted perplexity: exp(min(20, loss * tokens / (words - 1))).
printf ' = = Title = = \n The cat sat on the mat , and the dog ran . \n' > "$work/wiki.txt"
"$eval_bin" "$work/ck" --text "$work/wiki.txt" --json > "$work/w.out" 2> "$work/w.err" \
  || fail "eval wikitext: $(cat "$work/w.err")"
grep -q "wikitext detokenizer" "$work/w.err" || fail "detokenizer not named"
tail -1 "$work/w.out" > "$work/w.json"
[[ $(num words "$work/w.json") == 18 ]] || fail "wikitext words: $(cat "$work/w.json")"
# (Megatron's Python: 18 words; detokenized " == Title ==\nThe cat sat on the mat, and the dog
# ran.\n": 54 bytes, 53 targets.)
[[ $(num tokens "$work/w.json") == 53 ]] || fail "wikitext tokens: $(cat "$work/w.json")"
awk -v l="$(num loss "$work/w.json")" -v a="$(num adjusted_ppl "$work/w.json")" \
  'BEGIN { x = l * 53 / 17; e = exp(x < 20 ? x : 20); exit !(a > e * 0.9999 && a < e * 1.0001) }' \
  || fail "adjusted ppl: $(cat "$work/w.json")"

# 4. LAMBADA: the learnt sentence's last word vs a shuffled one.
printf '{"text": "number 12: the dog ran home."}\n' > "$work/good.jsonl"
printf '{"text": "number 12: the dog ran home!"}\n' > "$work/bad.jsonl"
for mode in "" --strict-lambada; do
  "$eval_bin" "$work/ck" --lambada "$work/good.jsonl" $mode --json > "$work/lg.out" 2>&1 \
    || fail "lambada good $mode: $(cat "$work/lg.out")"
  [[ $(tail -1 "$work/lg.out" | grep -oE '"accuracy":[0-9.]+' | cut -d: -f2) == 1.0 ]] \
    || fail "learnt sentence $mode not predicted: $(tail -2 "$work/lg.out")"
  "$eval_bin" "$work/ck" --lambada "$work/bad.jsonl" $mode --json > "$work/lb.out" 2>&1 \
    || fail "lambada bad $mode: $(cat "$work/lb.out")"
  [[ $(tail -1 "$work/lb.out" | grep -oE '"accuracy":[0-9.]+' | cut -d: -f2) == 0.0 ]] \
    || fail "shuffled word predicted $mode: $(tail -2 "$work/lb.out")"
done
grep -q '"strict":true' "$work/lb.out" || fail "strict not recorded"
# Strict: the target is " home." (6 bytes); non-strict: "." (1 byte).
"$eval_bin" "$work/ck" --lambada "$work/good.jsonl" --strict-lambada --json > "$work/s.out" 2>&1
[[ $(tail -1 "$work/s.out" | grep -oE '"target_tokens":[0-9]+' | cut -d: -f2) == 6 ]] \
  || fail "strict target tokens: $(tail -1 "$work/s.out")"

# 4b. [eval] during training: the tasks are logged at every evaluation (steps 0, 10, 20).
"$train" "$work/t.ini" train.steps=20 train.eval_interval=10 eval.text="$work/one.txt" \
  eval.text_detokenizer=none eval.text_stride=8 eval.lambada="$work/good.jsonl" \
  > "$work/tr_eval.log" 2>&1 || fail "train with [eval]: $(tail -3 "$work/tr_eval.log")"
for st in " 0/20" "10/20" "20/20"; do
  grep -qE "step $st \| eval text $work/one.txt: loss [0-9.]+ \| ppl [0-9.]+ \| adjusted ppl" \
    "$work/tr_eval.log" || fail "no [eval] text line at step $st: $(grep eval "$work/tr_eval.log")"
  grep -qE "step $st \| eval lambada $work/good.jsonl: accuracy [0-9.]+ \([01]/1\)" \
    "$work/tr_eval.log" || fail "no [eval] lambada line at step $st"
done

# 4c. Parallel layouts (needs mpirun).
if [[ -n ${MPIRUN:-} ]]; then
  for layout in "2 --tp 2" "2 --pp 2" "2" "4 --tp 2 --pp 2"; do
    read -r np flags <<< "$layout"
    # shellcheck disable=SC2086
    $MPIRUN -np "$np" "$eval_bin" "$work/ck" --text "$work/one.txt" --detokenize none --stride 8 \
      --lambada "$work/good.jsonl" --json $flags > "$work/p.out" 2> "$work/p.err" \
      || fail "eval np $np $flags: $(tail -5 "$work/p.err")"
    tail -1 "$work/p.out" | grep -o '"text":{[^}]*}' > "$work/p.json"
    [[ $(num windows "$work/p.json") == 10 && $(num tokens "$work/p.json") == $((${#text} - 1)) ]] \
      || fail "np $np $flags: $(cat "$work/p.json")"
    awk -v a="$(num loss "$work/p.json")" -v b="$(num loss "$work/t.json")" \
      'BEGIN { d = a - b; exit !(d < 1e-5 * b && -d < 1e-5 * b) }' \
      || fail "np $np $flags: loss $(num loss "$work/p.json"), one rank $(num loss "$work/t.json")"
    [[ $(tail -1 "$work/p.out" | grep -oE '"accuracy":[0-9.]+' | cut -d: -f2) == 1.0 ]] \
      || fail "np $np $flags: LAMBADA $(tail -1 "$work/p.out")"
    [[ $(grep -c '^checkpoint' "$work/p.out") == 1 ]] || fail "np $np: more than rank 0 printed"
  done
  # [eval] during training: the step-0 numbers of one rank (the same initial weights: the
  # one-rank padded vocabulary of the 257 byte tokens, 384, kept under TP).
  step0() { grep -oE "step +0/20 \| eval text [^:]*: loss [0-9.]+" "$1" | grep -oE '[0-9.]+$'; }
  for layout in parallel.tp=2 parallel.pp=2 "parallel.zero_stage=3 train.micro_batch=2"; do
    # shellcheck disable=SC2086
    $MPIRUN -np 2 "$train" "$work/t.ini" $layout model.padded_vocab=384 train.steps=20 \
      train.eval_interval=10 \
      eval.text="$work/one.txt" eval.text_detokenizer=none eval.text_stride=8 \
      eval.lambada="$work/good.jsonl" > "$work/tr_p.log" 2>&1 \
      || fail "train $layout with [eval]: $(tail -5 "$work/tr_p.log")"
    grep -qE "step 20/20 \| eval lambada $work/good.jsonl: accuracy [0-9.]+ \([01]/1\)" \
      "$work/tr_p.log" || fail "$layout: no [eval] lambada line at step 20"
    awk -v a="$(step0 "$work/tr_p.log")" -v b="$(step0 "$work/tr_eval.log")" \
      'BEGIN { d = a - b; exit !(a > 0 && d < 2e-4 && -d < 2e-4) }' \
      || fail "$layout: step-0 [eval] loss $(step0 "$work/tr_p.log"), one rank $(step0 "$work/tr_eval.log")"
  done
else
  echo "eval_test: MPIRUN not set: the parallel layouts (4c) are not checked"
fi

# 5. Bad input.
expect_error() {  # STATUS PATTERN ARGS...
  local want=$1 pattern=$2 rc=0
  shift 2
  "$eval_bin" "$@" > "$work/err.log" 2>&1 || rc=$?
  ((rc == want)) || fail "$*: exit status $rc, expected $want: $(cat "$work/err.log")"
  grep -qE -e "$pattern" "$work/err.log" || fail "$*: no '$pattern' in: $(cat "$work/err.log")"
}
expect_error 2 "no task" "$work/ck"
expect_error 2 "unknown flag --bogus" "$work/ck" --bogus
expect_error 2 "--tp and --pp must be >= 1" "$work/ck" --text "$work/one.txt" --tp 0
expect_error 1 "--tp 2 x --pp 1 does not divide the launch's 1 ranks" "$work/ck" \
  --text "$work/one.txt" --tp 2
expect_error 1 "eval: error: .*$work/nothing" "$work/nothing" --data "$work/d_text_document"
printf '{"text": "a b"}\n{"txt": "a b"}\n' > "$work/broken.jsonl"
expect_error 1 "broken.jsonl:2" "$work/ck" --lambada "$work/broken.jsonl"
expect_error 1 "stride <= seq_len; got .* stride 64" "$work/ck" --text "$work/one.txt" --stride 64
expect_error 1 "--seq-len 64 exceeds the model's \[model\] max_seq_len 32" "$work/ck" \
  --text "$work/one.txt" --seq-len 64
printf 'abc\xffdef' > "$work/bad.txt"
expect_error 1 "bad.txt: invalid UTF-8 at byte 3" "$work/ck" --text "$work/bad.txt"
echo "eval_test: all passed"
