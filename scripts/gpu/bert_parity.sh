#!/usr/bin/env bash
# BERT parity with Hugging Face, on the GPU machine from the repo root (needs torch,
# transformers, safetensors; the test binary from $BUILD/tests, default build):
#   tests/parity/hf_bert_parity.py builds a BertForPreTraining with random weights (std 0.2,
#   vocab 100, d 128, 2 heads, 2 layers, 64 positions) and one batch with padding, token types,
#   masked labels and sentence labels, and computes its MLM and NSP losses in float32; then
#   tests/model/bert_hf_parity_test loads those weights into anvil's BERT (type bert, post-LN,
#   GELU-erf, embedding LayerNorm, eps 1e-12; vocabulary padded to 128) and computes the same two
#   losses: on the CPU in f32 within 1e-4 relative, on the GPU in bf16 within 0.02 + 2%;
#   then `convert import` of the model's save_pretrained and `convert export` of that load in
#   transformers as BertForPreTraining with every tensor bitwise equal to the original.
#   (Binaries from .gpu/run when the bundle is there, else $BUILD.)
#   scripts/gpu/bert_parity.sh
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
python3 tests/parity/hf_bert_parity.py make "$work"
if [[ -x .gpu/run ]]; then
  ANVIL_BERT_PARITY_DIR=$work .gpu/run bert_hf_parity_test
else
  ANVIL_BERT_PARITY_DIR=$work "${BUILD:-build}/tests/bert_hf_parity_test"
fi
# bin/convert: HF's save_pretrained imported and exported again loads back bitwise.
anvil convert import "$work/hf" "$work/imported"
anvil convert export "$work/imported" "$work/hf_back"
python3 tests/parity/hf_bert_parity.py same-weights "$work/hf" "$work/hf_back"
