#!/usr/bin/env python3
"""Hugging Face T5ForConditionalGeneration reference for anvil's T5 (model/t5/t5.h).

  hf_t5_parity.py make OUT_DIR --version 1.0|1.1

builds a small T5 with random weights (HF's own initialization, seed 0; d_kv 64 so anvil's GPU
flash attention runs it), a random batch with encoder padding and ignored labels, and writes
  OUT_DIR/config.json, model.safetensors   HF's save_pretrained: the weights under HF's names
                               (anvil reads them as bin/convert import does: model/t5/hf_t5.cc)
  OUT_DIR/batch.safetensors    enc_tokens, dec_tokens, labels (-1: ignored), enc_lengths (i32)
with metadata: the T5 config (JSON), HF's mean token loss and the gradient norm of that loss
over all parameters, both in float64 on the CPU. tests/model/t5_parity_test.cc reads them.
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file
import transformers
from transformers import T5Config, T5ForConditionalGeneration

VOCAB, D, DKV, HEADS, DFF, LAYERS = 1000, 256, 64, 4, 512, 2
B, TE, TD = 4, 64, 24
LENGTHS = [64, 50, 33, 10]


def make(out, version):
    torch.manual_seed(0)
    v11 = version == "1.1"
    cfg = T5Config(vocab_size=VOCAB, d_model=D, d_kv=DKV, num_heads=HEADS, d_ff=DFF,
                   num_layers=LAYERS, num_decoder_layers=LAYERS,
                   relative_attention_num_buckets=32, relative_attention_max_distance=128,
                   dropout_rate=0.0, layer_norm_epsilon=1e-6,
                   feed_forward_proj="gated-gelu" if v11 else "relu",
                   tie_word_embeddings=not v11, decoder_start_token_id=0, pad_token_id=0)
    # transformers 5 keeps its default (tied) for the keyword: set it on the config, and check
    # that v1.1's head is its own tensor (else HF computes, and saves, a tied v1.1).
    cfg.tie_word_embeddings = not v11
    model = T5ForConditionalGeneration(cfg).double().eval()
    # With tie_word_embeddings False transformers 5 also unties the stacks' embed_tokens from
    # `shared`; T5 (and anvil) embed both stacks with the one `shared` matrix.
    model.encoder.embed_tokens = model.shared
    model.decoder.embed_tokens = model.shared
    tied = model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr()
    if tied == v11:
        sys.exit(f"hf_t5_parity: T5 v{version}'s lm_head is {'' if tied else 'not '}tied to shared "
                 f"(transformers {transformers.__version__}, tie_word_embeddings "
                 f"{model.config.tie_word_embeddings})")
    enc = torch.randint(0, VOCAB, (B, TE))
    mask = torch.zeros(B, TE, dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        mask[b, :n] = 1
    dec = torch.randint(0, VOCAB, (B, TD))
    labels = torch.randint(0, VOCAB, (B, TD))
    labels[1, 20:] = -100
    labels[3, 5] = -100
    out_hf = model(input_ids=enc, attention_mask=mask, decoder_input_ids=dec, labels=labels)
    out_hf.loss.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()
                          if p.grad is not None)).item()

    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)  # config.json, model.safetensors (f64)
    anvil_cfg = {"version": version, "vocab_size": VOCAB, "d_model": D, "d_kv": DKV,
                 "n_heads": HEADS, "d_ff": DFF, "n_encoder_layers": LAYERS,
                 "n_decoder_layers": LAYERS, "num_buckets": 32, "max_distance": 128,
                 "micro_batch": B, "enc_len": TE, "dec_len": TD}
    meta = {"config": json.dumps(anvil_cfg), "hf_loss": repr(out_hf.loss.item()),
            "hf_grad_norm": repr(norm)}
    lab = labels.clone()
    lab[lab < 0] = -1
    batch = {"enc_tokens": enc.int().reshape(-1), "dec_tokens": dec.int().reshape(-1),
             "labels": lab.int().reshape(-1), "enc_lengths": torch.tensor(LENGTHS).int()}
    save_file(batch, os.path.join(out, "batch.safetensors"), metadata=meta)
    print(f"T5 v{version}: HF loss {out_hf.loss.item():.6f} grad norm {norm:.6f}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--version", choices=["1.0", "1.1"], default="1.0")
    a = ap.parse_args()
    make(a.out, a.version)


if __name__ == "__main__":
    main()
