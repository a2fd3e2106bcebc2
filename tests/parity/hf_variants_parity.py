#!/usr/bin/env python3
"""Hugging Face BLOOM / LLaMA parity helpers for scripts/gpu/hf_variants_parity.sh (needs torch,
transformers). The data and the loss definition are hf_gpt2_parity.py's (make-data there).

  make-hf FAMILY DIR --vocab V --seq-len T   a small random BloomForCausalLM (2 layers, d 128,
      2 heads of 64) or LlamaForCausalLM (2 layers, d 256, 4 heads of 64, SwiGLU 512, untied
      head), weights std --init (0.2, so the loss depends on every weight; norms and biases
      perturbed too), saved with save_pretrained (f32 model.safetensors, config.json).
  hf-loss DIR PREFIX --seq-len T             the mean cross-entropy of AutoModelForCausalLM(DIR)
      on the sample (inputs: the document; targets: tokens 1..T-1, then the first token), f32.
  same-weights DIR_A DIR_B                    both load in transformers and every tensor of their
      state dicts is bitwise equal (an import followed by an export changes nothing).
"""
import argparse

import numpy as np
import torch
import transformers


def make_hf(args):
    torch.manual_seed(11)
    if args.family == "bloom":
        cfg = transformers.BloomConfig(vocab_size=args.vocab, hidden_size=128, n_layer=2, n_head=2,
                                       layer_norm_epsilon=1e-5, initializer_range=args.init,
                                       hidden_dropout=0.0, attention_dropout=0.0,
                                       bos_token_id=0, eos_token_id=0)
        model = transformers.BloomForCausalLM(cfg)
    elif args.family == "llama3":  # grouped-query (2 kv heads) + llama3 rope scaling
        cfg = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=256,
                                       intermediate_size=512, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2,
                                       max_position_embeddings=args.seq_len, rms_norm_eps=1e-5,
                                       rope_theta=500000.0, initializer_range=args.init,
                                       rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                     "low_freq_factor": 1.0,
                                                     "high_freq_factor": 4.0,
                                                     # short: the 64 positions meet all bands
                                                     "original_max_position_embeddings": 32},
                                       tie_word_embeddings=False, attention_bias=False,
                                       bos_token_id=0, eos_token_id=0)
        model = transformers.LlamaForCausalLM(cfg)
    elif args.family == "qwen2":  # grouped-query (2 kv heads) + q/k/v bias
        cfg = transformers.Qwen2Config(vocab_size=args.vocab, hidden_size=256,
                                       intermediate_size=512, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2,
                                       max_position_embeddings=args.seq_len, rms_norm_eps=1e-6,
                                       rope_theta=1000000.0, initializer_range=args.init,
                                       use_sliding_window=False, tie_word_embeddings=False,
                                       bos_token_id=0, eos_token_id=0)
        model = transformers.Qwen2ForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=256,
                                       intermediate_size=512, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=4,
                                       max_position_embeddings=args.seq_len, rms_norm_eps=1e-5,
                                       rope_theta=10000.0, initializer_range=args.init,
                                       tie_word_embeddings=False, attention_bias=False,
                                       bos_token_id=0, eos_token_id=0)
        model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():  # non-trivial norms and biases (init leaves them 1 and 0)
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name or "ln_f" in name:
                p.add_(args.init * torch.randn_like(p))
    model.save_pretrained(args.dir, safe_serialization=True)


def load(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    return model.cuda().eval() if torch.cuda.is_available() else model.eval()


def hf_loss(args):
    doc = np.fromfile(args.prefix + ".bin", dtype=np.uint16)[:args.seq_len].astype(np.int64)
    model = load(args.dir)
    ids = torch.tensor(doc, device=model.device)[None]
    targets = torch.tensor(np.concatenate([doc[1:], doc[:1]]), device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    print(f"{torch.nn.functional.cross_entropy(logits, targets).item():.6f}")


def same_weights(args):
    a, b = load(args.a).state_dict(), load(args.b).state_dict()
    if a.keys() != b.keys():
        raise SystemExit(f"FAIL: tensor names differ: {sorted(a.keys() ^ b.keys())}")
    bad = [k for k in a if not torch.equal(a[k], b[k])]
    if bad:
        raise SystemExit(f"FAIL: tensors differ after import + export: {bad}")
    print(f"same weights: {len(a)} tensors bitwise equal")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("make-hf")
    h.add_argument("family", choices=["bloom", "llama", "llama3", "qwen2"])
    h.add_argument("dir")
    h.add_argument("--init", type=float, default=0.2)
    l = sub.add_parser("hf-loss")
    l.add_argument("dir")
    l.add_argument("prefix")
    s = sub.add_parser("same-weights")
    s.add_argument("a")
    s.add_argument("b")
    for q in (h, l):
        q.add_argument("--vocab", type=int, default=1000)
        q.add_argument("--seq-len", type=int, default=64)
    args = p.parse_args()
    {"make-hf": make_hf, "hf-loss": hf_loss, "same-weights": same_weights}[args.cmd](args)


if __name__ == "__main__":
    main()
