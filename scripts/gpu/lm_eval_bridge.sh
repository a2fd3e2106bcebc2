#!/usr/bin/env bash
# bin/serve as lm-evaluation-harness's local-completions backend, against Hugging Face, on the
# GPU machine from the repo root (needs torch, transformers; binaries from .gpu/run when the
# bundle is there, else $BUILD/bin): a small GPT-2 trained 200 steps on docs/*.md and exported;
# bin/serve on cuda (bf16) and on cpu (f32) answers the harness's loglikelihood requests for 48
# (context, continuation) pairs of README.md lines (tests/parity/lm_eval_bridge.py), compared
# with GPT2LMHeadModel in float32: CPU within 1e-3 + 1e-4 |ll|, CUDA within 0.1 + 2% (bf16).
#   scripts/gpu/lm_eval_bridge.sh
set -euo pipefail
work=$(mktemp -d)
server_pid=
trap 'kill $server_pid 2>/dev/null || true; rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
for f in docs/*.md; do cat "$f"; printf '\n\n'; done > "$work/corpus.txt"
anvil preprocess --input "$work/corpus.txt" --output-prefix "$work/docs" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 4 \
  --no-progress > /dev/null
anvil train configs/demo_gpu.ini data.paths="$work/docs_text_document" data.cache_dir="$work/cache" \
  model.max_seq_len=256 data.seq_len=256 model.d_model=256 model.n_heads=4 model.n_layers=4 \
  train.steps=200 train.eval_iters=0 train.log_interval=100 train.device=cuda \
  tokenizer.type=GPT2BPE tokenizer.vocab_file=data/gpt2/encoder.json \
  tokenizer.merge_file=data/gpt2/vocab.bpe checkpoint.save="$work/ck" > "$work/train.log" 2>&1 \
  || { tail -5 "$work/train.log"; exit 1; }
anvil convert export "$work/ck" "$work/hf" > /dev/null
for device in cuda cpu; do
  anvil serve "$work/ck" --port 0 --device "$device" --batch-size 8 > "$work/serve.log" 2>&1 &
  server_pid=$!
  port=
  for _ in $(seq 600); do
    port=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$work/serve.log" | grep -oE '[0-9]+$' || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$work/serve.log"; exit 1; }
  tol=(--tol-abs 1e-3 --tol-rel 1e-4)
  [[ $device == cuda ]] && tol=(--tol-abs 0.1 --tol-rel 0.02)
  echo "--- bin/serve on $device"
  python3 tests/parity/lm_eval_bridge.py "http://127.0.0.1:$port/v1/completions" "$work/hf" \
    README.md "${tol[@]}"
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
done
