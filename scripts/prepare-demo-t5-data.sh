#!/usr/bin/env bash
# Builds the T5 demo corpus data/demo/kjv_t5_text_sentence.{bin,idx}: the King James Bible of
# scripts/prepare-demo-data.sh (data/demo/kjv.txt, one document per chapter) split into
# sentences and tokenized with the bundled BERT WordPiece vocabulary (lower case) plus 100
# sentinels <extra_id_0..99> (Megatron's T5 data: --split-sentences, --vocab-extra-ids 100).
# Idempotent: does nothing when the outputs exist. BUILD / PREPROCESS as prepare-demo-data.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PREPROCESS=${PREPROCESS:-$BUILD/bin/preprocess}
PREFIX=data/demo/kjv_t5

if [[ -f "${PREFIX}_text_sentence.bin" && -f "${PREFIX}_text_sentence.idx" ]]; then
  echo "prepare-demo-t5-data: ${PREFIX}_text_sentence.{bin,idx} exist, nothing to do"
  exit 0
fi
PREPROCESS=$PREPROCESS scripts/prepare-demo-data.sh
"$PREPROCESS" --input data/demo/kjv.txt --output-prefix "$PREFIX" \
  --tokenizer-type BertWordPieceLowerCase --vocab-file data/bert/vocab.txt \
  --split-sentences --vocab-extra-ids 100 --no-progress
