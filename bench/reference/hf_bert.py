"""Hugging Face reference for anvil's BERT training speed (GPU machine, same run).

BertForPreTraining built from a config with random weights (f32), bf16 autocast, HF's SDPA
attention, fused AdamW, one micro-batch of B x T random tokens per step with an all-ones padding
mask, MLM labels on 15% of the positions (-100 elsewhere) and a random binary label, the shape
of gpt_step_bench's BERT_large_B32_T512 (same masking rate, same vocabulary). Prints one line per
mode with tokens/s (B x T input tokens), the number anvil's step benchmark reports.

usage: hf_bert.py [--layers 24 --d 1024 --heads 16 --vocab 30522 --B 32 --T 512
                   --steps 10 --warmup 3 --modes eager,compile]
"""
import argparse

import torch
from train_timing import hf_train_step, release, time_steps


def run(mode, a):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=a.vocab, hidden_size=a.d, num_hidden_layers=a.layers,
                                  num_attention_heads=a.heads, intermediate_size=4 * a.d,
                                  max_position_embeddings=max(512, a.T),
                                  attn_implementation="sdpa")
    model = transformers.BertForPreTraining(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    ids = torch.randint(0, a.vocab, (a.B, a.T), device="cuda")
    types = torch.randint(0, 2, (a.B, a.T), device="cuda")
    mask = torch.ones(a.B, a.T, dtype=torch.long, device="cuda")
    labels = torch.where(torch.rand(a.B, a.T, device="cuda") < 0.15, ids, torch.full_like(ids, -100))
    nsp = torch.randint(0, 2, (a.B,), device="cuda")

    step = hf_train_step(step_model, opt, input_ids=ids, token_type_ids=types,
                         attention_mask=mask, labels=labels, next_sentence_label=nsp)
    dt, loss, mem = time_steps(step, a.warmup, a.steps)
    print(f"hf-bert-{mode}: {dt*1e3:.1f} ms/step  {a.B * a.T / dt:,.0f} tokens/s  "
          f"peak mem {mem:.1f} GiB  loss {loss:.3f}", flush=True)
    del model, opt, step_model
    release()


def main():
    p = argparse.ArgumentParser()
    for k, v in dict(layers=24, d=1024, heads=16, vocab=30522, B=32, T=512, steps=10,
                     warmup=3).items():
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--modes", default="eager,compile")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in a.modes.split(","):
        run(mode, a)


if __name__ == "__main__":
    main()
