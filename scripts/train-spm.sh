#!/usr/bin/env bash
# Re-creates data/t5/spm.model: a T5-style SentencePiece unigram model (pad 0, eos 1, unk 2, no
# bos) trained with Debian's spm_train on the bundled KJV corpus (scripts/prepare-demo-data.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/prepare-demo-data.sh
spm_train --input=data/demo/kjv.txt --model_prefix=data/t5/spm --vocab_size=8000 \
  --model_type=unigram --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1 --character_coverage=1.0 \
  --num_threads=1 --input_sentence_size=0 --shuffle_input_sentence=false --minloglevel=1
rm -f data/t5/spm.vocab
