"""Hugging Face reference for anvil's T5 training speed (GPU machine, same run).

T5ForConditionalGeneration built from a config with random weights (f32), bf16 autocast, HF's
attention (T5 has no SDPA path: eager matmul + softmax with the relative-position bias), fused
AdamW, one micro-batch of B x Te encoder and B x Td decoder random tokens per step. Prints one
line per mode with tokens/s (encoder + decoder tokens, as anvil's T5 log counts them).
T5-base by default, Megatron's T5 shape (32 x 512 / 114).

usage: hf_t5.py [--version 1.0|1.1 --layers 12 --d 768 --heads 12 --d_kv 64 --ffn 3072
                 --vocab 30624 --B 32 --Te 512 --Td 114 --steps 10 --warmup 3
                 --modes eager,compile]
"""
import argparse

import torch
from train_timing import hf_train_step, release, time_steps


def run(mode, a):
    import transformers

    torch.manual_seed(0)
    v11 = a.version == "1.1"
    cfg = transformers.T5Config(vocab_size=a.vocab, d_model=a.d, d_kv=a.d_kv, num_heads=a.heads,
                                d_ff=a.ffn, num_layers=a.layers, num_decoder_layers=a.layers,
                                dropout_rate=0.1, feed_forward_proj="gated-gelu" if v11 else "relu",
                                tie_word_embeddings=not v11, use_cache=False)
    model = transformers.T5ForConditionalGeneration(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    enc = torch.randint(0, a.vocab, (a.B, a.Te), device="cuda")
    dec = torch.randint(0, a.vocab, (a.B, a.Td), device="cuda")
    labels = torch.randint(0, a.vocab, (a.B, a.Td), device="cuda")

    step = hf_train_step(step_model, opt, input_ids=enc, decoder_input_ids=dec, labels=labels)
    dt, loss, mem = time_steps(step, a.warmup, a.steps)
    tok_s = a.B * (a.Te + a.Td) / dt
    print(f"hf-t5-v{a.version}-{mode}: {dt*1e3:.1f} ms/step  {tok_s:,.0f} tokens/s  "
          f"peak mem {mem:.1f} GiB  loss {loss:.3f}", flush=True)
    del model, opt, step_model
    release()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--version", choices=["1.0", "1.1"], default="1.0")
    for k, v in dict(layers=12, d=768, heads=12, d_kv=64, ffn=3072, vocab=30624, B=32, Te=512,
                     Td=114, steps=10, warmup=3).items():
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--modes", default="eager,compile")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in a.modes.split(","):
        run(mode, a)


if __name__ == "__main__":
    main()
