#!/usr/bin/env bash
# Builds the demo corpus data/demo/kjv_gpt2_text_document.{bin,idx} (GPT-2 BPE tokens, EOD
# <|endoftext|> = 50256 after each document) from the King James Bible of Debian's bible-kjv
# package: its `bible` CLI prints every verse as "Ge1:1 In the beginning ...", which becomes one
# document per chapter (1189), the chapter's verses one per line, in data/demo/kjv.txt, then
# bin/preprocess tokenizes it with the bundled GPT-2 vocabulary (data/gpt2).
# MODEL=bert instead makes data/demo/kjv_bert_text_sentence.{bin,idx} for BERT: the same text
# split into sentences (--split-sentences), WordPiece tokens of data/bert/vocab.txt (lower case).
# MODEL=t5 makes data/demo/kjv_t5_text_sentence.{bin,idx}: the same with 100 sentinels
# <extra_id_0..99> (Megatron's T5 data: --vocab-extra-ids 100).
# Idempotent: does nothing when the outputs exist (delete data/demo/ to rebuild).
# BUILD=dir picks the build directory holding bin/preprocess (default build);
# PREPROCESS=path overrides the binary itself.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PREPROCESS=${PREPROCESS:-$BUILD/bin/preprocess}
OUT=data/demo
MODEL=${MODEL:-gpt}
if [[ "$MODEL" == bert ]]; then
  PREFIX=$OUT/kjv_bert
  RESULT=${PREFIX}_text_sentence
  TOKENIZE=(--tokenizer-type BertWordPieceLowerCase --vocab-file data/bert/vocab.txt
    --split-sentences)
elif [[ "$MODEL" == t5 ]]; then
  PREFIX=$OUT/kjv_t5
  RESULT=${PREFIX}_text_sentence
  TOKENIZE=(--tokenizer-type BertWordPieceLowerCase --vocab-file data/bert/vocab.txt
    --split-sentences --vocab-extra-ids 100)
else
  PREFIX=$OUT/kjv_gpt2
  RESULT=${PREFIX}_text_document
  TOKENIZE=(--tokenizer-type GPT2BPE --vocab-file data/gpt2/encoder.json
    --merge-file data/gpt2/vocab.bpe --append-eod)
fi

if [[ -f "$RESULT.bin" && -f "$RESULT.idx" ]]; then
  echo "prepare-demo-data: $RESULT.{bin,idx} exist, nothing to do"
  exit 0
fi
if ! command -v bible >/dev/null 2>&1; then
  echo "prepare-demo-data: the 'bible' program is missing: apt-get install bible-kjv" >&2
  exit 1
fi
if [[ ! -x "$PREPROCESS" ]]; then
  echo "prepare-demo-data: $PREPROCESS not built: cmake --build $BUILD --target preprocess" >&2
  exit 1
fi

mkdir -p "$OUT"
if [[ ! -s "$OUT/kjv.txt" ]]; then
  # "Ge1:1 text" -> chapter key "Ge1"; a blank line between chapters ends each document.
  bible -f 'Gen1:1-Rev22:21' | awk '
    {
      ref = $1
      chapter = substr(ref, 1, index(ref, ":") - 1)
      text = substr($0, length(ref) + 2)
      if (chapter != last && NR > 1) print ""
      last = chapter
      print text
    }' >"$OUT/kjv.txt.tmp"
  chapters=$(awk 'BEGIN { n = 0 } /^$/ { n++ } END { print n + 1 }' "$OUT/kjv.txt.tmp")
  if [[ "$chapters" != 1189 ]]; then
    echo "prepare-demo-data: expected 1189 chapters from 'bible', got $chapters" >&2
    exit 1
  fi
  mv "$OUT/kjv.txt.tmp" "$OUT/kjv.txt"
fi

"$PREPROCESS" --input "$OUT/kjv.txt" --output-prefix "$PREFIX" "${TOKENIZE[@]}" --no-progress
