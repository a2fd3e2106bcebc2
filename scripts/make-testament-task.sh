#!/usr/bin/env bash
# Builds a classification task from the King James Bible (Debian's bible-kjv: `bible` prints
# every verse as "Ge1:1 In the beginning ..."): which testament is a verse from, label 0 = Old
# (Genesis-Malachi, 23145 verses), 1 = New (Matthew-Revelation, 7957). Balanced: TRAIN verses
# of each testament into OUT/testament_train.jsonl and DEV of each into OUT/testament_dev.jsonl,
# spread evenly over each testament; a verse is in at most one of them (dev verses are every
# 10th verse of the testament's stride, train verses the others). Deterministic.
#   scripts/make-testament-task.sh OUT [TRAIN=2000] [DEV=200]
# Each line: {"text": "<verse text without its reference>", "label": 0 | 1}.
set -euo pipefail
out=${1:?usage: make-testament-task.sh OUT [TRAIN] [DEV]}
train=${2:-2000}
dev=${3:-200}
if ! command -v bible >/dev/null 2>&1; then
  echo "make-testament-task: the 'bible' program is missing: apt-get install bible-kjv" >&2
  exit 1
fi
mkdir -p "$out"
bible -f 'Gen1:1-Rev22:21' | awk -v train="$train" -v dev="$dev" -v out="$out" '
  BEGIN { nt = 0 }
  {
    ref = $1
    if (ref ~ /^Mat1:1$/) nt = 1
    text = substr($0, length(ref) + 2)
    gsub(/\\/, "\\\\", text)
    gsub(/"/, "\\\"", text)
    n[nt]++
    verse[nt, n[nt]] = text
  }
  END {
    if (n[0] != 23145 || n[1] != 7957) {
      printf "make-testament-task: expected 23145 + 7957 verses, got %d + %d\n", n[0], n[1] > "/dev/stderr"
      exit 1
    }
    for (label = 0; label <= 1; label++) {
      # train + dev verses at an even stride; every 10th pick goes to dev until dev are taken.
      step = n[label] / (train + dev)
      d = 0; t = 0
      for (k = 0; k < train + dev; k++) {
        v = verse[label, int(k * step) + 1]
        line = sprintf("{\"text\": \"%s\", \"label\": %d}", v, label)
        if (k % 10 == 9 && d < dev) { print line > (out "/testament_dev.jsonl"); d++ }
        else if (t < train) { print line > (out "/testament_train.jsonl"); t++ }
        else { print line > (out "/testament_dev.jsonl"); d++ }
      }
    }
  }'
echo "make-testament-task: $(wc -l < "$out/testament_train.jsonl") training and" \
  "$(wc -l < "$out/testament_dev.jsonl") dev verses in $out"
