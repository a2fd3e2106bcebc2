#!/usr/bin/env python3
"""lm-evaluation-harness's local-completions model against bin/serve, checked against Hugging
Face (needs torch, transformers; used by scripts/gpu/lm_eval_bridge.sh):

  lm_eval_bridge.py URL HF_DIR TEXT [--n N] [--tol-abs A] [--tol-rel R]

Builds N (context, continuation) pairs from the lines of TEXT (context: a line's words but the
last 1-3, continuation: the rest), tokenized with AutoTokenizer(HF_DIR) as the harness does;
sends them as the harness's loglikelihood requests (token ids, echo, logprobs 1, max_tokens 1,
temperature 0; 8 per request) and reads each answer as its parse_logprobs does: loglikelihood =
sum(token_logprobs[ctxlen:-1]), greedy = every continuation token's logprob is the top one.
GPT2LMHeadModel in float32 computes both directly. PASS when every loglikelihood is within
A + R |ll| of HF's and the greedy flags agree on all but 5% of the pairs.
"""
import argparse
import json
import urllib.request

import torch
import transformers


def pairs(text, tok, n):
    out = []
    with open(text, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if len(words) < 6:
                continue
            k = 1 + len(out) % 3
            ctx, cont = " ".join(words[:-k]), " " + " ".join(words[-k:])
            out.append((tok(ctx)["input_ids"], tok(cont)["input_ids"]))
            if len(out) == n:
                break
    return out


def served(url, batch):
    body = {"model": "anvil", "prompt": [c + x for c, x in batch], "temperature": 0,
            "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": True}
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        out = json.load(r)
    res = []
    for choice, (ctx, _) in zip(sorted(out["choices"], key=lambda c: c["index"]), batch):
        lps = choice["logprobs"]["token_logprobs"][len(ctx):-1]
        tops = choice["logprobs"]["top_logprobs"][len(ctx):-1]
        res.append((sum(lps), all(lp == max(t.values()) for lp, t in zip(lps, tops))))
    return res


def reference(model, batch):
    res = []
    with torch.no_grad():
        for ctx, cont in batch:
            ids = torch.tensor(ctx + cont, device=model.device)[None]
            logp = torch.log_softmax(model(ids).logits[0].double(), -1)
            rows = logp[len(ctx) - 1:len(ctx) + len(cont) - 1]
            target = torch.tensor(cont, device=model.device)
            ll = rows.gather(1, target[:, None]).sum().item()
            res.append((ll, bool((rows.argmax(-1) == target).all())))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("hf_dir")
    ap.add_argument("text")
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--tol-abs", type=float, default=1e-3)
    ap.add_argument("--tol-rel", type=float, default=1e-4)
    a = ap.parse_args()
    tok = transformers.AutoTokenizer.from_pretrained(a.hf_dir)
    model = transformers.GPT2LMHeadModel.from_pretrained(a.hf_dir, dtype=torch.float32)
    model = (model.cuda() if torch.cuda.is_available() else model).eval()
    ps = pairs(a.text, tok, a.n)
    got, want = [], []
    for i in range(0, len(ps), 8):
        got += served(a.url, ps[i:i + 8])
        want += reference(model, ps[i:i + 8])
    worst = max(abs(g[0] - w[0]) - a.tol_rel * abs(w[0]) for g, w in zip(got, want))
    flips = sum(g[1] != w[1] for g, w in zip(got, want))
    print(f"{len(ps)} pairs: loglikelihood anvil {sum(g[0] for g in got):.4f} HF "
          f"{sum(w[0] for w in want):.4f}, worst |diff| - rel tol {worst:.2e} (abs tol "
          f"{a.tol_abs:g}); greedy anvil {sum(g[1] for g in got)} HF {sum(w[1] for w in want)}, "
          f"{flips} differ")
    ok = worst <= a.tol_abs and flips <= 0.05 * len(ps)
    print("PASS" if ok else "FAIL")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
