#!/usr/bin/env bash
# bin/generate and bin/serve end to end on the CPU (ctest generate_serve_test):
#   1. train a tiny GPT with the GPT-2 tokenizer for a few steps and save a checkpoint;
#   2. bin/generate: a greedy completion is deterministic, starts with the prompt and reports
#      tokens/s and time to first token; --dry-run prints the KV cache; a JSONL file of prompts
#      of different lengths gives one result line each, in order, and the same greedy text as
#      each prompt alone; a missing or corrupt checkpoint, an empty prompt, a prompt longer than
#      the context and a bad option are clear errors;
#   3. bin/serve on a free port, checked with curl: a completion (equal to bin/generate's greedy
#      text), a streaming completion (data: chunks, then data: [DONE]), malformed JSON and bad
#      fields (400 with an invalid_request_error), huge max_tokens (capped by the context), an
#      empty prompt, concurrent requests (batched: each equals its request alone), and a client
#      that disconnects mid-stream: the server survives everything and still answers.
#   3b. logprobs and echo (lm-evaluation-harness's requests): prompts of token ids scored, the
#      generated tokens' scores equal with and without echo, greedy tokens their top
#      alternative, max_tokens 0 returns the prompt only; bad logprobs requests are 400s.
#   4. a checkpoint imported from Hugging Face (bin/convert: no tokenizer kept) generates the
#      same text with --tokenizer-type/--vocab-file/--merge-file, and says so without them.
#   5. with MPIRUN set (mpirun and its flags), on the CPU: bin/generate tensor-parallel over 2
#      ranks gives the single-rank greedy text, printed once; bin/serve over 2 ranks answers a
#      greedy request and concurrent sampled ones with the single-rank server's texts, and an
#      echo request with its scores.
# usage: generate_serve_test.sh BUILD/bin/train BUILD/bin/preprocess BUILD/bin/generate
#        BUILD/bin/serve BUILD/bin/convert (from the repository root; DEVICE=cuda runs
#        generation on a GPU)
set -euo pipefail
train=$1
preprocess=$2
generate=$3
serve=$4
convert=$5
device=${DEVICE:-cpu}
# Texts made with other batch shapes are compared exactly on the CPU (f32: equal to rounding);
# in bf16 on CUDA other GEMM shapes may flip a near-tie, so there only formats are checked
# (gpt_inference_test compares those paths' logits on the GPU).
exact=1
[[ $device == cuda ]] && exact=0
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. A tiny model with a tokenizer. head_dim 64: what the CUDA flash attention takes.
for i in $(seq 40); do printf 'In the beginning %d was the word, and the word was %d.\n\n' "$i" "$i"; done \
  > "$work/corpus.txt"
"$preprocess" --input "$work/corpus.txt" --output-prefix "$work/gpt2" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 1 \
  --no-progress > "$work/pre.log" 2>&1 || fail "preprocess: $(tail -2 "$work/pre.log")"
cat > "$work/t.ini" <<INI
[model]
max_seq_len = 48
d_model = 128
n_heads = 2
n_layers = 2
[data]
paths = $work/gpt2_text_document
seq_len = 32
cache_dir = $work/cache
[train]
micro_batch = 2
global_batch = 2
steps = 4
device = cpu
eval_iters = 0
log_interval = 2
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

# 2. bin/generate.
gen() { "$generate" "$work/ck" --device "$device" "$@"; }
gen --prompt "In the beginning" --max-new-tokens 6 --greedy > "$work/g1.txt" 2> "$work/g1.err" \
  || fail "generate: $(cat "$work/g1.err")"
gen --prompt "In the beginning" --max-new-tokens 6 --greedy > "$work/g2.txt" 2>/dev/null
cmp -s "$work/g1.txt" "$work/g2.txt" || fail "greedy generation is not deterministic"
grep -q "^In the beginning" "$work/g1.txt" || fail "the output does not start with the prompt"
grep -qE "6 new tokens in .* tokens/s; time to first token [0-9.]+ ms" "$work/g1.err" \
  || fail "no timing line: $(cat "$work/g1.err")"
gen --prompt "x" --batch-size 4 --dry-run > "$work/dry.txt" || fail "dry run failed"
grep -qE "^ +kv_cache +[0-9.]+ MiB" "$work/dry.txt" || fail "no KV cache in the plan: $(cat "$work/dry.txt")"
elem=4; [[ $device == cuda ]] && elem=2  # f32 on the CPU, bf16 on CUDA
grep -q "KV cache: $((2 * 4 * 48 * 2 * 128 * elem)) bytes" "$work/dry.txt" \
  || fail "KV cache bytes (2 layers x 4 x 48 x 2 x 128 x $elem B): $(cat "$work/dry.txt")"
printf '%s\n' '{"prompt": "In the beginning"}' '{"prompt": "word"}' \
  '{"prompt": "In the beginning 3 was the word, and"}' > "$work/prompts.jsonl"
gen --input "$work/prompts.jsonl" --output "$work/out.jsonl" --max-new-tokens 5 --greedy \
  --batch-size 2 2> "$work/j.err" || fail "jsonl: $(cat "$work/j.err")"
[[ $(wc -l < "$work/out.jsonl") == 3 ]] || fail "expected 3 result lines: $(cat "$work/out.jsonl")"
python3 - "$work/out.jsonl" "$work/g1.txt" "$exact" <<'PY' || fail "jsonl results"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["prompt"] for r in rows] == ["In the beginning", "word",
                                       "In the beginning 3 was the word, and"], rows
assert all(r["tokens"] == 5 and r["finish_reason"] == "length" for r in rows), rows
alone = open(sys.argv[2]).read()[len("In the beginning"):].rstrip("\n")
# The first prompt alone made 6 tokens; 5 of them are a prefix of that text.
assert rows[0]["completion"], rows[0]
assert sys.argv[3] == "0" or alone.startswith(rows[0]["completion"]), (alone, rows[0])
PY
expect_error() {  # expect_error PATTERN ARGS...: exit status != 0 and PATTERN on stderr
  local pattern=$1; shift
  if "$generate" "$@" > /dev/null 2> "$work/err.txt"; then fail "accepted: $*"; fi
  grep -q -- "$pattern" "$work/err.txt" || fail "for $*: expected '$pattern', got: $(cat "$work/err.txt")"
}
expect_error "checkpoint directory $work/nope not found" "$work/nope" --prompt hi
expect_error "prompt 1 is empty" "$work/ck" --prompt ""
long=$(printf 'word %.0s' $(seq 60))  # 61 tokens: " word" x 59 after "word", and the last space
expect_error "prompt 1 has 61 tokens; the model's context is 48 tokens" "$work/ck" --prompt "$long"
expect_error "unknown option --frobnicate" "$work/ck" --prompt hi --frobnicate
expect_error "top_p must lie in (0, 1]" "$work/ck" --prompt hi --top-p 0
cp -r "$work/ck" "$work/bad"
step=$(cat "$work/bad/latest")
printf 'garbage' | dd of="$work/bad/step_$(printf %08d "$step")/rank_00000.safetensors" bs=1 \
  seek=100 conv=notrunc 2>/dev/null
expect_error "rank_00000.safetensors" "$work/bad" --prompt hi

# 3. bin/serve on a free port.
wait_port() {  # LOG: sets port once the server started by server_pid listens
  port=
  for _ in $(seq 300); do
    port=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$1" | grep -oE '[0-9]+$' || true)
    [[ -n $port ]] && break
    kill -0 "$server_pid" 2>/dev/null || fail "serve exited: $(cat "$1")"
    sleep 0.1
  done
  [[ -n $port ]] || fail "serve did not start: $(cat "$1")"
  url="http://127.0.0.1:$port/v1/completions"
}
"$serve" "$work/ck" --port 0 --device "$device" --batch-size 4 > "$work/serve.log" 2>&1 &
server_pid=$!
wait_port "$work/serve.log"
post() { curl -sS --max-time 60 -o "$work/body" -w '%{http_code}' "$url" -d "$1"; }
alive() { [[ $(curl -sS --max-time 10 "http://127.0.0.1:$port/health") == ok ]] || fail "server gone after $1"; }

code=$(post '{"prompt": "In the beginning", "max_tokens": 6, "temperature": 0}')
[[ $code == 200 ]] || fail "completion: $code $(cat "$work/body")"
cp "$work/body" "$work/serve1.json"
python3 - "$work/body" "$work/g1.txt" "$exact" <<'PY' || fail "completion body: $(cat "$work/body")"
import json, sys
r = json.load(open(sys.argv[1]))
want = open(sys.argv[2]).read()[len("In the beginning"):].rstrip("\n")
assert r["object"] == "text_completion" and r["choices"][0]["text"], r
assert sys.argv[3] == "0" or r["choices"][0]["text"] == want, (r, want)
assert r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 6, r
PY
curl -sS -N --max-time 60 "$url" -d '{"prompt": "In the beginning", "max_tokens": 6, "temperature": 0, "stream": true}' \
  > "$work/sse.txt" || fail "streaming request failed"
python3 - "$work/sse.txt" "$work/g1.txt" "$work/body" <<'PY' || fail "stream: $(cat "$work/sse.txt")"
import json, sys
events = [l[len("data: "):] for l in open(sys.argv[1]).read().split("\n\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events
chunks = [json.loads(e) for e in events[:-1]]
text = "".join(c["choices"][0]["text"] for c in chunks)
# The same request as the completion just made (same server, same batch shapes).
want = json.load(open(sys.argv[3]))["choices"][0]["text"]
assert text == want, (text, want)
assert chunks[-1]["choices"][0]["finish_reason"] == "length", chunks[-1]
assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]), chunks
PY
for body in '{"prompt": "x"' 'not json' '[1, 2]' '{"max_tokens": 3}' '{"prompt": 5}' \
    '{"prompt": "x", "max_tokens": -1}' '{"prompt": "x", "temperature": "hot"}' \
    '{"prompt": "x", "top_p": 0}' '{"prompt": "", "max_tokens": 3}' \
    "{\"prompt\": \"$long\"}" '{"prompt": "x", "stream": "yes"}'; do
  code=$(post "$body")
  [[ $code == 400 ]] || fail "expected 400 for $body, got $code: $(cat "$work/body")"
  grep -q '"type":"invalid_request_error"' "$work/body" || fail "no error object for $body"
done
alive "bad requests"
code=$(post '{"prompt": "In the beginning", "max_tokens": 100000000, "temperature": 0}')
[[ $code == 200 ]] || fail "huge max_tokens: $code $(cat "$work/body")"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); u=r["usage"]; assert u["total_tokens"]<=48 and r["choices"][0]["finish_reason"] in ("length","stop"), r' \
  "$work/body" || fail "huge max_tokens not capped: $(cat "$work/body")"
# Concurrent sampled requests (batched by the scheduler) equal each one alone.
pids=()
for i in 1 2 3 4 5 6; do
  curl -sS --max-time 60 "$url" -o "$work/c$i.json" \
    -d "{\"prompt\": \"In the beginning $i\", \"max_tokens\": 8, \"seed\": $i, \"top_k\": 50}" &
  pids+=($!)
done
wait "${pids[@]}" || fail "a concurrent request failed"
for i in $( ((exact)) && echo 1 2 3 4 5 6); do
  post "{\"prompt\": \"In the beginning $i\", \"max_tokens\": 8, \"seed\": $i, \"top_k\": 50}" > /dev/null
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["choices"]==b["choices"], (a, b)' \
    "$work/c$i.json" "$work/body" || fail "concurrent request $i differs from alone"
done
# A client that goes away mid-stream: read one chunk, then hang up.
curl -sS -N --max-time 60 "$url" \
  -d '{"prompt": "In", "max_tokens": 40, "stream": true, "seed": 1}' 2>/dev/null | head -c 50 > /dev/null || true
alive "a client disconnect"
code=$(post '{"prompt": "In the beginning", "max_tokens": 6, "temperature": 0}')
[[ $code == 200 ]] || fail "after the disconnect: $code"
kill -0 "$server_pid" || fail "server died"

# 3b. Log-probabilities, as lm-evaluation-harness's local-completions model asks for them: a
# prompt of token ids with echo and logprobs scores every prompt token after the first; the
# generated tokens of an echo request have the scores of the same request without echo (the
# prefill reads out every position's logits besides the last); greedy tokens are their top
# alternative;
# max_tokens 0 returns the prompt only, with the same scores; bad logprobs requests are 400s.
ids='[818, 262, 3726, 2727, 1793, 262]'  # GPT-2 ids: "In the beginning God created the"
for name in echo gen zero; do
  case $name in
    echo) body="{\"prompt\": $ids, \"max_tokens\": 3, \"temperature\": 0, \"logprobs\": 2, \"echo\": true}" ;;
    gen) body="{\"prompt\": $ids, \"max_tokens\": 3, \"temperature\": 0, \"logprobs\": 2}" ;;
    zero) body="{\"prompt\": [$ids, $ids], \"max_tokens\": 0, \"logprobs\": 1, \"echo\": true}" ;;
  esac
  code=$(post "$body")
  [[ $code == 200 ]] || fail "logprobs request $name: $code $(cat "$work/body")"
  cp "$work/body" "$work/lp_$name.json"
done
python3 - "$work/lp_echo.json" "$work/lp_gen.json" "$work/lp_zero.json" "$exact" <<'PY' \
  || fail "logprobs: $(cat "$work/lp_echo.json" "$work/lp_gen.json")"
import json, math, sys
echo, gen, zero = (json.load(open(f)) for f in sys.argv[1:4])
tol = 1e-4 if sys.argv[4] == "1" else 0.1  # LM-head GEMMs of other row counts: f32 / bf16
e = echo["choices"][0]
lp = e["logprobs"]
n = len(lp["tokens"])
assert n == 6 + 3 and len(lp["token_logprobs"]) == n and len(lp["top_logprobs"]) == n, lp
assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
for t, top in zip(lp["token_logprobs"][1:], lp["top_logprobs"][1:]):
    assert math.isfinite(t) and t <= 1e-9 and 1 <= len(top) <= 2, (t, top)
    assert max(top.values()) >= t - 1e-6, (t, top)
assert e["text"] == "".join(lp["tokens"]), (e["text"], lp["tokens"])
assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0, lp
g = gen["choices"][0]["logprobs"]
assert g["tokens"] == lp["tokens"][6:], (g["tokens"], lp["tokens"])
for a, b, top in zip(g["token_logprobs"], lp["token_logprobs"][6:], g["top_logprobs"]):
    assert abs(a - b) <= tol, (a, b)
    assert abs(max(top.values()) - a) <= 1e-9, (a, top)  # greedy: the top alternative
# lm-evaluation-harness: loglikelihood of the continuation after a 3-token context.
assert math.isfinite(sum(lp["token_logprobs"][3:-1]))
assert len(zero["choices"]) == 2 and zero["usage"]["completion_tokens"] == 0, zero
for c in zero["choices"]:
    z = c["logprobs"]
    assert c["finish_reason"] == "length" and c["text"] == "".join(lp["tokens"][:6]), c
    assert z["tokens"] == lp["tokens"][:6], z
    for a, b in zip(z["token_logprobs"][1:], lp["token_logprobs"][1:6]):
        assert abs(a - b) <= tol, (a, b)  # the same prefill (other LM-head chunks)
PY
# Streamed with logprobs: the chunks' entries, in order, are the unstreamed request's.
curl -sS -N --max-time 60 "$url" -d "{\"prompt\": $ids, \"max_tokens\": 3, \"temperature\": 0, \"logprobs\": 2, \"stream\": true}" \
  > "$work/lp_stream.txt" || fail "streamed logprobs request"
python3 - "$work/lp_stream.txt" "$work/lp_gen.json" "$exact" <<'PY' \
  || fail "streamed logprobs: $(cat "$work/lp_stream.txt")"
import json, sys
chunks = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
want = json.load(open(sys.argv[2]))["choices"][0]["logprobs"]
tol = 0.0 if sys.argv[3] == "1" else 1e-3
got = {"tokens": [], "token_logprobs": [], "text_offset": []}
for c in chunks:
    lp = c["choices"][0]["logprobs"]
    for k in got:
        got[k] += lp[k]
assert got["tokens"] == want["tokens"] and got["text_offset"] == want["text_offset"], (got, want)
for a, b in zip(got["token_logprobs"], want["token_logprobs"]):
    assert abs(a - b) <= tol, (a, b)
PY
for body in '{"prompt": "x", "echo": true, "stream": true}' '{"prompt": [1, 99999999]}' \
    '{"prompt": "x", "max_tokens": 0}' '{"prompt": "x", "logprobs": 50}' \
    '{"prompt": [[1, 2], 3]}' '{"prompt": "x", "echo": 1}'; do
  code=$(post "$body")
  [[ $code == 400 ]] || fail "expected 400 for $body, got $code: $(cat "$work/body")"
done
alive "logprobs requests"

# 4. Through Hugging Face and back: the weights come without a tokenizer.
"$convert" export "$work/ck" "$work/hf" > /dev/null 2>&1 || fail "convert export"
"$convert" import "$work/hf" "$work/imported" > /dev/null 2>&1 || fail "convert import"
expect_error "has no \[tokenizer\], so text prompts cannot be encoded; give --tokenizer-type" \
  "$work/imported" --prompt "In the beginning" --device "$device"
gen_imported() {
  "$generate" "$work/imported" --device "$device" --tokenizer-type GPT2BPE \
    --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe "$@"
}
gen_imported --prompt "In the beginning" --max-new-tokens 6 --greedy > "$work/g3.txt" 2>/dev/null \
  || fail "generate from the import"
cmp -s "$work/g1.txt" "$work/g3.txt" || fail "the import generates other text: $(cat "$work/g3.txt")"
# 5. Tensor parallelism over 2 ranks (CPU: the logits equal one rank's to f32 rounding).
if [[ -n ${MPIRUN:-} && $device == cpu ]]; then
  $MPIRUN -np 2 "$generate" "$work/ck" --prompt "In the beginning" --max-new-tokens 6 --greedy \
    > "$work/tp.txt" 2> "$work/tp.err" || fail "generate under mpirun: $(tail -3 "$work/tp.err")"
  cmp -s "$work/g1.txt" "$work/tp.txt" || fail "TP 2 generates other text: $(cat "$work/tp.txt")"
  grep -q "tp 2)" "$work/tp.err" || fail "no tp 2 in the timing line: $(cat "$work/tp.err")"
  # bin/serve tensor-parallel over 2 ranks: the greedy completion of the one-rank server, and
  # concurrent sampled requests (the scheduler's batches replayed on rank 1) as on one rank.
  kill "$server_pid" 2>/dev/null || true
  $MPIRUN -np 2 "$serve" "$work/ck" --port 0 --batch-size 4 > "$work/serve_tp.log" 2>&1 &
  server_pid=$!
  wait_port "$work/serve_tp.log"
  grep -q "tp 2: listening" "$work/serve_tp.log" || fail "serve not on tp 2: $(cat "$work/serve_tp.log")"
  code=$(post '{"prompt": "In the beginning", "max_tokens": 6, "temperature": 0}')
  [[ $code == 200 ]] || fail "TP 2 serve completion: $code $(cat "$work/body")"
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["choices"]==b["choices"], (a, b)' \
    "$work/serve1.json" "$work/body" || fail "TP 2 serve: other text than one rank's"
  pids=()
  for i in 1 2 3; do
    curl -sS --max-time 60 "$url" -o "$work/t$i.json" \
      -d "{\"prompt\": \"In the beginning $i\", \"max_tokens\": 8, \"seed\": $i, \"top_k\": 50}" &
    pids+=($!)
  done
  wait "${pids[@]}" || fail "a concurrent request to the TP 2 server failed"
  for i in 1 2 3; do
    python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["choices"]==b["choices"], (a, b)' \
      "$work/c$i.json" "$work/t$i.json" || fail "TP 2 serve: concurrent request $i differs from one rank's"
  done
  # An echo request (rank 1 replays the scored prefill): the one-rank scores.
  code=$(post "{\"prompt\": $ids, \"max_tokens\": 3, \"temperature\": 0, \"logprobs\": 2, \"echo\": true}")
  [[ $code == 200 ]] || fail "TP 2 serve echo: $code $(cat "$work/body")"
  python3 - "$work/lp_echo.json" "$work/body" <<'PY' || fail "TP 2 serve echo: other scores than one rank's"
import json, sys
a, b = (json.load(open(f))["choices"][0]["logprobs"] for f in sys.argv[1:3])
assert a["tokens"] == b["tokens"], (a["tokens"], b["tokens"])
for x, y in zip(a["token_logprobs"][1:], b["token_logprobs"][1:]):
    assert abs(x - y) <= 1e-4, (x, y)
PY
  kill "$server_pid" 2>/dev/null || true
  server_pid=
fi
echo "generate_serve_test: OK"
