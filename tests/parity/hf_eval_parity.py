#!/usr/bin/env python3
"""Hugging Face side of scripts/gpu/eval_parity.sh (needs torch, transformers): the numbers
bin/eval reports, computed independently with GPT2LMHeadModel in float32 on an exported model.

  make-lambada TEXT OUT --n N   OUT: JSONL {"text": line} for the first N lines of TEXT with at
      least 8 words (non-strict LAMBADA: the target is each line's last token).
  ppl DIR TEXT --seq-len T --stride S   Megatron's zero-shot WIKITEXT103 metric on TEXT (no
      detokenizer): tokenized whole by AutoTokenizer(DIR); window w starts at w * S and counts
      all its targets (w = 0) or its last S (w > 0); windows = max(ceil(max(N - 1 - S, 0) / S)
      + 1, 1). Prints JSON {"loss", "ppl", "tokens", "windows"}.
  lambada DIR JSONL --seq-len T   greedy accuracy: the argmax after context = tokens[:-1] must
      be tokens[-1] (teacher forcing; the context cut to its last T tokens). Prints JSON
      {"correct", "total", "predictions"} (predictions: the argmax of each example).
"""
import argparse
import json
import math

import torch
import transformers


def load(dir_):
    model = transformers.GPT2LMHeadModel.from_pretrained(dir_, torch_dtype=torch.float32)
    model = model.cuda().eval() if torch.cuda.is_available() else model.eval()
    return model, transformers.AutoTokenizer.from_pretrained(dir_)


def make_lambada(args):
    with open(args.text, encoding="utf-8") as f:
        lines = [l.strip() for l in f if len(l.split()) >= 8]
    with open(args.out, "w", encoding="utf-8") as f:
        for line in lines[:args.n]:
            f.write(json.dumps({"text": line}) + "\n")


def ppl(args):
    model, tok = load(args.dir)
    with open(args.text, "rb") as f:
        text = f.read().decode("utf-8")
    ids = tok(text)["input_ids"]
    n, t, s = len(ids), args.seq_len, args.stride
    windows = max(math.ceil(max(n - 1 - s, 0) / s) + 1, 1)
    loss_sum, counted = 0.0, 0
    with torch.no_grad():
        for w in range(windows):
            start = w * s
            chunk = ids[start:start + t + 1]
            if len(chunk) < 2:
                continue
            inp = torch.tensor(chunk[:-1], device=model.device)[None]
            tgt = torch.tensor(chunk[1:], device=model.device)
            first = 0 if w == 0 else t - s  # the counted positions of this window
            logits = model(inp).logits[0].float()
            losses = torch.nn.functional.cross_entropy(logits, tgt, reduction="none")
            loss_sum += losses[first:].sum().item()
            counted += losses[first:].numel()
    loss = loss_sum / counted
    print(json.dumps({"loss": loss, "ppl": math.exp(min(20.0, loss)), "tokens": counted,
                      "windows": windows}))


def lambada(args):
    model, tok = load(args.dir)
    correct, preds = 0, []
    with open(args.jsonl, encoding="utf-8") as f:
        texts = [json.loads(l)["text"] for l in f if l.strip()]
    with torch.no_grad():
        for text in texts:
            ids = tok(text)["input_ids"]
            ctx, target = ids[:-1][-args.seq_len:], ids[-1]
            logits = model(torch.tensor(ctx, device=model.device)[None]).logits[0, -1].float()
            p = int(torch.argmax(logits).item())
            preds.append(p)
            correct += p == target
    print(json.dumps({"correct": correct, "total": len(texts), "predictions": preds}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-lambada")
    m.add_argument("text")
    m.add_argument("out")
    m.add_argument("--n", type=int, default=200)
    q = sub.add_parser("ppl")
    q.add_argument("dir")
    q.add_argument("text")
    q.add_argument("--stride", type=int, default=32)
    l = sub.add_parser("lambada")
    l.add_argument("dir")
    l.add_argument("jsonl")
    for x in (q, l):
        x.add_argument("--seq-len", type=int, default=128)
    args = p.parse_args()
    {"make-lambada": make_lambada, "ppl": ppl, "lambada": lambada}[args.cmd](args)


if __name__ == "__main__":
    main()
