#!/usr/bin/env bash
# Generation speed of bin/generate (KV cache, greedy) next to Hugging Face `generate` on the same
# GPT-2 124M weights, batch 1 and 32, in one call on the GPU machine from the repo root (bundle in
# .gpu/, demo corpus in data/demo/): configs/gpt2_124m.ini trains 20 steps and saves; the
# checkpoint is exported (bin/convert export) for transformers; both generate 128 new tokens after
# a 32-token prompt (HF: min_new_tokens = max_new_tokens, so neither stops early; anvil: the
# prompt's text never reaches the EOD token in 128 greedy steps of this model, checked by the
# token count it prints).
#   scripts/gpu/generate_speed.sh
set -uo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.gpu/run train configs/gpt2_124m.ini data.paths=data/demo/kjv_gpt2_text_document \
  "data.cache_dir=$work/cache" train.steps=20 train.eval_iters=0 optim.warmup_steps=2 \
  train.device=cuda "checkpoint.save=$work/ck" tokenizer.type=GPT2BPE \
  tokenizer.vocab_file=data/gpt2/encoder.json tokenizer.merge_file=data/gpt2/vocab.bpe \
  > "$work/train.log" 2>&1 || { tail -5 "$work/train.log"; exit 1; }
.gpu/run convert export "$work/ck" "$work/hf" > /dev/null || exit 1
prompt="And God said, Let there be light: and there was light. And God saw the light, that it"
# Each side runs 5 times per batch size; the median tokens/s is the number to quote (single
# runs of 0.2-1 s vary by +-15% on this machine). anvil's runs are separate processes, each
# timing its own first call (cuBLASLt warm-up included in the time to first token).
for b in 1 32; do
  python3 -c "import json,sys; [print(json.dumps({'prompt': sys.argv[1]})) for _ in range($b)]" \
    "$prompt" > "$work/p$b.jsonl"
  for r in 1 2 3 4 5; do
    .gpu/run generate "$work/ck" --input "$work/p$b.jsonl" --output "$work/o$b.jsonl" --greedy \
      --max-new-tokens 128 --batch-size "$b" --device cuda 2>&1 | grep -E "tokens/s"
  done > "$work/a$b.txt"
  sed "s/^/anvil batch $b: /" "$work/a$b.txt"
  grep -oE '[0-9.]+ tokens/s' "$work/a$b.txt" | awk '{print $1}' | sort -g |
    awk -v b="$b" '{v[NR] = $1} END {printf "anvil batch %d: median %.1f tokens/s of %d runs\n", b, v[int((NR + 1) / 2)], NR}'
done
python3 - "$work/hf" "$prompt" <<'PY'
import statistics, sys, time, torch, transformers
path, prompt = sys.argv[1], sys.argv[2]
tok = transformers.AutoTokenizer.from_pretrained(path)
model = transformers.GPT2LMHeadModel.from_pretrained(path, dtype=torch.bfloat16).cuda().eval()
for b in (1, 32):
    ids = tok([prompt] * b, return_tensors="pt").input_ids.cuda()
    kw = dict(max_new_tokens=128, min_new_tokens=128, do_sample=False, pad_token_id=tok.eos_token_id,
              attention_mask=torch.ones_like(ids))
    model.generate(ids, **kw)  # warm-up
    rates = []
    for _ in range(5):
        torch.cuda.synchronize(); t = time.perf_counter()
        out = model.generate(ids, **kw)
        torch.cuda.synchronize(); dt = time.perf_counter() - t
        n = (out.shape[1] - ids.shape[1]) * b
        rates.append(n / dt)
    print(f"hf batch {b}: " + ", ".join(f"{r:.1f}" for r in rates) + " tokens/s; "
          f"median {statistics.median(rates):.1f} tokens/s of 5 runs (bf16, HF generate, KV cache)")
PY
