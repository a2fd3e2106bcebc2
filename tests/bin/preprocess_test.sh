#!/usr/bin/env bash
# bin/preprocess with bad arguments end to end (ctest preprocess_bin_test): each case must end
# with rc != 0, a one-line message naming the flag or the files, no crash, and no output or
# temporary file left in the output directory:
#   1. --workers 100000 (std::thread used to abort, leaving a 0-byte .tmp);
#   2. an input that is the output .bin (by name, and through a hard link): refused, input kept;
#   3. --chunk-kib 99999999999 and --vocab-extra-ids -1: the flag and the allowed range;
#   4. worker threads the system refuses (a huge stack size limit): an error, not an abort;
#   5. SIGINT / SIGTERM while the input (a FIFO) is still being written: exit 130 / 143, the
#      temporaries removed;
#   6. temporaries of a dead process for the same outputs: removed, and said so.
# usage: preprocess_test.sh BUILD/bin/preprocess
set -euo pipefail
preprocess=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
mkdir "$work/out"
printf '{"text": "hello world"}\n{"text": "second document"}\n' > "$work/in.jsonl"

# expect_error NAME PATTERN ARGS...: preprocess fails (not by a signal), prints PATTERN, and
# leaves $work/out as it was.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  local before rc=0
  before=$(ls -A "$work/out")
  "$preprocess" --no-progress "$@" > "$work/$name.log" 2>&1 || rc=$?
  ((rc == 1)) || fail "$name: exit status $rc, expected 1: $(tail -3 "$work/$name.log")"
  grep -qF -- "$pattern" "$work/$name.log" || fail "$name: no '$pattern' in: $(cat "$work/$name.log")"
  [[ $(ls -A "$work/out") == "$before" ]] || fail "$name: left files: $(ls -A "$work/out")"
}
byte=(--tokenizer-type Byte --output-prefix "$work/out/o")

# 1. Workers beyond the limit.
expect_error workers "--workers: '100000' is not an integer in [1, 1024]" \
  --input "$work/in.jsonl" "${byte[@]}" --workers 100000

# 2. The input is the output .bin, by name and through a hard link.
cp "$work/in.jsonl" "$work/out/o_text_document.bin"
expect_error same_name "the input $work/out/o_text_document.bin is the output" \
  --input "$work/out/o_text_document.bin" --input-format jsonl "${byte[@]}"
cmp -s "$work/in.jsonl" "$work/out/o_text_document.bin" || fail "the input was changed"
rm "$work/out/o_text_document.bin"
ln "$work/in.jsonl" "$work/out/o_text_document.idx"
expect_error same_inode "is the output $work/out/o_text_document.idx" \
  --input "$work/in.jsonl" "${byte[@]}"
cmp -s "$work/in.jsonl" "$work/out/o_text_document.idx" || fail "the linked input was changed"
rm "$work/out/o_text_document.idx"

# 3. Out-of-range numbers name the flag and the range.
expect_error chunk "--chunk-kib: '99999999999' is not an integer in [1, 1048576]" \
  --input "$work/in.jsonl" "${byte[@]}" --chunk-kib 99999999999
expect_error extra_ids "--vocab-extra-ids: '-1' is not an integer in [0, 1048576]" \
  --input "$work/in.jsonl" "${byte[@]}" --vocab-extra-ids -1

# 4. std::thread fails when each thread's stack (the stack size limit, in KiB) cannot be had.
(ulimit -s 4000000000 && expect_error threads "cannot start the reader and 4 worker threads" \
  --input "$work/in.jsonl" "${byte[@]}" --workers 4)

# 5. A signal while the writer of the input FIFO is idle: the run stops within ~100 ms.
mkfifo "$work/fifo"
for sig in INT TERM; do
  "$preprocess" --no-progress --input "$work/fifo" --input-format jsonl "${byte[@]}" \
    > "$work/sig_$sig.log" 2>&1 &
  pid=$!
  exec 3> "$work/fifo"
  printf '{"text": "a document"}\n' >&3
  for _ in $(seq 100); do compgen -G "$work/out/*.tmp.*" > /dev/null && break; sleep 0.1; done
  compgen -G "$work/out/*.tmp.*" > /dev/null || fail "SIG$sig: no temporary to clean up"
  kill -"$sig" "$pid"
  rc=0
  wait "$pid" || rc=$?
  exec 3>&-
  expected=$((128 + $(kill -l "$sig")))
  ((rc == expected)) || fail "SIG$sig: exit status $rc, expected $expected: $(cat "$work/sig_$sig.log")"
  grep -q "interrupted by SIG$sig; the unfinished outputs were removed" "$work/sig_$sig.log" \
    || fail "SIG$sig: no message in: $(cat "$work/sig_$sig.log")"
  [[ -z $(ls -A "$work/out") ]] || fail "SIG$sig: left files: $(ls -A "$work/out")"
done

# 6. Temporaries left by a dead process (older and current names) are removed and logged.
dead=$(bash -c 'echo $$')
touch "$work/out/o_text_document.bin.tmp.$dead" "$work/out/o_text_document.idx.tmp.$(uname -n).$dead"
"$preprocess" --no-progress --input "$work/in.jsonl" "${byte[@]}" > "$work/stale.log" 2>&1 \
  || fail "run over stale temporaries failed: $(cat "$work/stale.log")"
grep -qF "removed $work/out/o_text_document.bin.tmp.$dead, left by an interrupted run" \
  "$work/stale.log" || fail "stale .bin temporary not reported: $(cat "$work/stale.log")"
grep -qF "removed $work/out/o_text_document.idx.tmp.$(uname -n).$dead" "$work/stale.log" \
  || fail "stale .idx temporary not reported: $(cat "$work/stale.log")"
rm "$work/out/"*

# The same arguments, valid: the run succeeds, so the cases above fail for their own reason.
"$preprocess" --no-progress --input "$work/in.jsonl" "${byte[@]}" --workers 2 --chunk-kib 1 \
  > "$work/ok.log" 2>&1 || fail "valid run failed: $(cat "$work/ok.log")"
[[ $(ls "$work/out") == $'o_text_document.bin\no_text_document.idx' ]] \
  || fail "valid run wrote: $(ls "$work/out")"
echo "preprocess_test: all cases passed"
