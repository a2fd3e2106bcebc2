#!/usr/bin/env bash
# bin/train refuses data whose token ids fall outside [model] vocab_size when it opens the
# datasets (ctest train_token_ids_test), naming the .bin, the document and the position, instead
# of a CHECK failure when the sample is reached; the same data trains with a vocabulary that
# holds every id, and the scan's result is cached.
# usage: train_token_ids_test.sh BUILD/bin/train BUILD/bin/preprocess
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# Byte tokenizer: ids are bytes; '~' (126) sits in document 3 only.
for i in $(seq 0 49); do
  if ((i == 3)); then text="abc ~ def $i"; else text="abc def ghi $i"; fi
  printf '{"text": "%s"}\n' "$text"
done > "$work/d.jsonl"
"$preprocess" --no-progress --input "$work/d.jsonl" --tokenizer-type Byte \
  --output-prefix "$work/d" > "$work/pre.log" 2>&1 || fail "preprocess: $(cat "$work/pre.log")"
cat > "$work/t.ini" <<INI
[model]
vocab_size = 120
max_seq_len = 16
d_model = 32
n_heads = 2
n_layers = 2
[data]
paths = $work/d_text_document
seq_len = 16
eod_token = 0
cache_dir = $work/cache
[train]
micro_batch = 2
global_batch = 4
steps = 2
device = cpu
eval_iters = 0
INI
rc=0
"$train" "$work/t.ini" > "$work/bad.log" 2>&1 || rc=$?
((rc == 1)) || fail "exit status $rc, expected 1: $(tail -3 "$work/bad.log")"
grep -qF "$work/d_text_document.bin: document 3 (sequence 3, token 4, byte" "$work/bad.log" \
  || fail "no message naming file and document: $(tail -3 "$work/bad.log")"
grep -qF "holds token id 126, outside [0, 120)" "$work/bad.log" \
  || fail "no id and range: $(tail -3 "$work/bad.log")"
[[ ! -e "$work/cache" ]] || fail "an index was built before the check"
"$train" "$work/t.ini" model.vocab_size=128 > "$work/ok.log" 2>&1 \
  || fail "vocab_size 128 run failed: $(tail -3 "$work/ok.log")"
# The scan's result is cached in cache_dir (once it exists) and believed while the files stay.
[[ -f "$work/cache/d_text_document_token_ids.txt" ]] || \
  "$train" "$work/t.ini" model.vocab_size=128 > "$work/ok2.log" 2>&1
read -r lo hi _ < "$work/cache/d_text_document_token_ids.txt"
[[ "$lo $hi" == "32 126" ]] || fail "cached range is '$lo $hi', expected '32 126'"
sed -i 's/^32 126 /32 119 /' "$work/cache/d_text_document_token_ids.txt"
"$train" "$work/t.ini" > "$work/cached.log" 2>&1 || fail "the cached range was not used"
echo "train_token_ids_test: all cases passed"
