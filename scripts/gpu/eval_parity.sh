#!/usr/bin/env bash
# bin/eval against Hugging Face, on the GPU machine from the repo root (needs torch,
# transformers; binaries from .gpu/run when the bundle is there, else $BUILD/bin):
#   anvil trains a small GPT-2 with GPT-2's tokenizer on docs/*.md (bf16 on the GPU, 300 steps),
#   saves it, and bin/convert exports it; then on README.md (an unseen text, no detokenizer,
#   seq_len 128, stride 32):
#   1. perplexity: bin/eval --text on cuda (bf16) and on cpu (f32) vs GPT2LMHeadModel in f32
#      over the same windows (tests/parity/hf_eval_parity.py ppl): within 0.5%, the same number
#      of counted tokens and windows;
#   2. greedy next tokens under teacher forcing: bin/eval --lambada (non-strict: the target is
#      each line's last token) over 200 lines of README.md vs HF's argmax after the same
#      context: the same correct count on cpu (f32; at most 1 example apart for near-ties), at
#      most 2% of the examples apart on cuda (bf16 logits);
#   3. data parallelism on the GPU: `mpirun -np 2 bin/eval` (dp 2, both processes on the one
#      GPU, each evaluating half of the windows and examples) gives the one-process CUDA numbers
#      (perplexity to 1e-6 relative: the same kernels, the sums in another order; the same
#      greedy count).
#   scripts/gpu/eval_parity.sh
set -euo pipefail
py=tests/parity/hf_eval_parity.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
fail() { echo "FAIL $*"; exit 1; }
# field NAME JSON: a top-level or nested number by key (first occurrence).
field() { python3 -c "import json, sys; d = json.loads(sys.argv[2]); print(d$1)" "" "$2"; }

for f in docs/*.md; do cat "$f"; printf '\n\n'; done > "$work/corpus.txt"
anvil preprocess --input "$work/corpus.txt" --output-prefix "$work/docs" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 4 \
  --no-progress
cat > "$work/t.ini" <<INI
[model]
max_seq_len = 128
d_model = 256
n_heads = 4
n_layers = 4
[data]
paths = $work/docs_text_document
seq_len = 128
cache_dir = $work/cache
[tokenizer]
type = GPT2BPE
vocab_file = data/gpt2/encoder.json
merge_file = data/gpt2/vocab.bpe
[train]
micro_batch = 16
global_batch = 16
steps = 300
device = cuda
eval_iters = 0
log_interval = 100
[optim]
lr = 1e-3
warmup_steps = 30
INI
anvil train "$work/t.ini" checkpoint.save="$work/ck" > "$work/train.log" 2>&1 \
  || { tail -5 "$work/train.log"; exit 1; }
grep -E 'step +300/300' "$work/train.log"
anvil convert export "$work/ck" "$work/hf"
python3 "$py" make-lambada README.md "$work/lambada.jsonl" --n 200

hf_ppl=$(python3 "$py" ppl "$work/hf" README.md --seq-len 128 --stride 32)
hf_lam=$(python3 "$py" lambada "$work/hf" "$work/lambada.jsonl" --seq-len 128)
echo "HF: $hf_ppl"
echo "HF lambada: correct $(field '["correct"]' "$hf_lam") of $(field '["total"]' "$hf_lam")"
for device in cuda cpu; do
  out=$(anvil eval "$work/ck" --text README.md --detokenize none --seq-len 128 --stride 32 \
    --lambada "$work/lambada.jsonl" --device "$device" --batch 16 --json 2> "$work/eval.err" |
    tail -1) || { cat "$work/eval.err"; exit 1; }
  echo "anvil $device: $out"
  if [[ $device == cuda ]]; then one_gpu=$out; fi
  python3 - "$out" "$hf_ppl" "$hf_lam" "$device" <<'PY' || fail "eval parity on $device"
import json, sys
a, h, hl, device = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
t = a["text"]
ok = True
if t["tokens"] != h["tokens"] or t["windows"] != h["windows"]:
    print(f"tokens/windows differ: anvil {t['tokens']}/{t['windows']}, HF {h['tokens']}/{h['windows']}")
    ok = False
rel = abs(t["ppl"] - h["ppl"]) / h["ppl"]
print(f"{device}: ppl anvil {t['ppl']:.4f} HF {h['ppl']:.4f} (rel diff {100 * rel:.3f}%, limit 0.5%)")
ok &= rel <= 0.005
diff = abs(a["lambada"]["correct"] - hl["correct"])
limit = 1 if device == "cpu" else max(1, int(0.02 * hl["total"]))
print(f"{device}: greedy correct anvil {a['lambada']['correct']} HF {hl['correct']} of {hl['total']} "
      f"(|diff| {diff}, limit {limit})")
ok &= diff <= limit
sys.exit(0 if ok else 1)
PY
done
if [[ -x .gpu/run ]]; then evalbin=(.gpu/run eval); else evalbin=("${BUILD:-build}/bin/eval"); fi
dp=$(mpirun --allow-run-as-root -np 2 "${evalbin[@]}" "$work/ck" --text README.md --detokenize none \
  --seq-len 128 --stride 32 --lambada "$work/lambada.jsonl" --device cuda --batch 16 --json \
  2> "$work/eval_dp.err" | tail -1) || { cat "$work/eval_dp.err"; exit 1; }
echo "anvil cuda dp 2: $dp"
python3 - "$dp" "$one_gpu" <<'PY' || fail "dp 2 on the GPU"
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rel = abs(a["text"]["ppl"] - b["text"]["ppl"]) / b["text"]["ppl"]
print(f"cuda dp 2: ppl {a['text']['ppl']:.6f} vs one process {b['text']['ppl']:.6f} (rel {rel:.1e}); "
      f"greedy correct {a['lambada']['correct']} vs {b['lambada']['correct']}; dp {a['dp']}")
la, lb = a["lambada"], b["lambada"]
same = la["correct"] == lb["correct"] and la["total"] == lb["total"]
same &= abs(la["target_loss"] - lb["target_loss"]) <= 1e-6 * abs(lb["target_loss"])
sys.exit(0 if rel <= 1e-6 and same and a["dp"] == 2 else 1)
PY
echo "PASS eval_parity"
