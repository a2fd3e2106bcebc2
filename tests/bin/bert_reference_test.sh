#!/usr/bin/env bash
# anvil's BERT against an independent implementation on the CPU (ctest bert_reference_test):
# tests/parity/hf_bert_parity.py make-ref writes random BertForPreTraining weights under the HF
# names, a padded batch and the masked-LM and next-sentence losses of a pure-Python float64
# forward (HF's math: post-LN, erf GELU, key-padding mask, tanh pooler, tied decoder + bias);
# tests/model/bert_hf_parity_test loads the weights by name into anvil and must give both losses
# within 1e-4 relative. (scripts/gpu/bert_parity.sh does the same against HF itself.)
# usage: bert_reference_test.sh BUILD/tests/bert_hf_parity_test
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 tests/parity/hf_bert_parity.py make-ref "$work"
ANVIL_BERT_PARITY_DIR=$work "$1" --gtest_brief=0
