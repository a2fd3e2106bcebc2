#!/usr/bin/env python3
"""Hugging Face GPT-2 parity helpers for scripts/gpu/hf_parity.sh (needs torch, transformers).

  make-data PREFIX --vocab V --seq-len T   PREFIX.bin/.idx: 64 copies of one random document
      of T tokens, so every anvil training sample (T + 1 tokens, samples overlap by one) is
      that document followed by its first token, whatever Megatron's shuffles do.
  make-hf DIR --vocab V --seq-len T ...    a GPT2LMHeadModel with random weights (std --init),
      saved with save_pretrained (model.safetensors, tied LM head).
  hf-loss DIR PREFIX --seq-len T           the mean cross-entropy of the HF model on that
      sample (inputs: the document; targets: tokens 1..T-1 and the first token), in float32.
  tok-check DIR PREFIX TEXT                AutoTokenizer.from_pretrained(DIR) encodes TEXT (+ eos)
      to the ids of document 0 of PREFIX.bin/.idx (bin/preprocess --append-eod of TEXT).
"""
import argparse
import struct

import numpy as np
import torch
import transformers


def make_data(args):
    rng = np.random.default_rng(1234)
    doc = rng.integers(1, args.vocab, size=args.seq_len, dtype=np.int32).astype(np.uint16)
    n = 64
    with open(args.prefix + ".bin", "wb") as f:
        for _ in range(n):
            f.write(doc.tobytes())
    sizes = np.full(n, args.seq_len, dtype=np.int32)
    pointers = np.arange(n, dtype=np.int64) * args.seq_len * 2
    doc_idx = np.arange(n + 1, dtype=np.int64)
    with open(args.prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", 8))  # uint16
        f.write(struct.pack("<Q", n))
        f.write(struct.pack("<Q", n + 1))
        f.write(sizes.tobytes())
        f.write(pointers.tobytes())
        f.write(doc_idx.tobytes())


def make_hf(args):
    torch.manual_seed(7)
    cfg = transformers.GPT2Config(vocab_size=args.vocab, n_positions=args.seq_len,
                                  n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head,
                                  initializer_range=args.init, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg)
    with torch.no_grad():  # non-trivial LayerNorms and biases too
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(args.init * torch.randn_like(p))
    model.save_pretrained(args.dir, safe_serialization=True)


def hf_loss(args):
    doc = np.fromfile(args.prefix + ".bin", dtype=np.uint16)[:args.seq_len].astype(np.int64)
    model = transformers.GPT2LMHeadModel.from_pretrained(args.dir, torch_dtype=torch.float32)
    model = model.cuda().eval() if torch.cuda.is_available() else model.eval()
    ids = torch.tensor(doc, device=model.device)[None]
    targets = torch.tensor(np.concatenate([doc[1:], doc[:1]]), device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    print(f"{torch.nn.functional.cross_entropy(logits, targets).item():.6f}")


def tok_check(args):
    tok = transformers.AutoTokenizer.from_pretrained(args.dir)
    with open(args.prefix + ".idx", "rb") as f:
        f.seek(34)
        size = struct.unpack("<i", f.read(4))[0]
    anvil_ids = np.fromfile(args.prefix + ".bin", dtype=np.uint16)[:size].tolist()
    with open(args.text, encoding="utf-8") as f:
        text = f.read().split("\n\n")[0]
    hf_ids = tok(text)["input_ids"] + [tok.eos_token_id]
    print(f"anvil {anvil_ids}\nHF    {hf_ids}")
    if anvil_ids != hf_ids:
        raise SystemExit("FAIL tokenizer: the ids differ")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("make-data")
    d.add_argument("prefix")
    h = sub.add_parser("make-hf")
    h.add_argument("dir")
    h.add_argument("--n-embd", type=int, default=128)
    h.add_argument("--n-layer", type=int, default=2)
    h.add_argument("--n-head", type=int, default=4)
    h.add_argument("--init", type=float, default=0.2)
    l = sub.add_parser("hf-loss")
    l.add_argument("dir")
    l.add_argument("prefix")
    t = sub.add_parser("tok-check")
    t.add_argument("dir")
    t.add_argument("prefix")
    t.add_argument("text")
    for q in (d, h, l):
        q.add_argument("--vocab", type=int, default=500)
        q.add_argument("--seq-len", type=int, default=64)
    args = p.parse_args()
    {"make-data": make_data, "make-hf": make_hf, "hf-loss": hf_loss,
     "tok-check": tok_check}[args.cmd](args)


if __name__ == "__main__":
    main()
