"""Hugging Face reference for anvil's BLOOM- and LLaMA-style training speed (GPU machine, same run).

BloomForCausalLM or LlamaForCausalLM built from a config with random weights (f32), bf16
autocast, HF's default attention implementation ("sdpa"), fused AdamW, one micro-batch of
B x T random tokens per step. Prints one line per mode, as bench/reference/gpt2_pytorch.py does,
with tokens/s, TFLOP/s and MFU from anvil's formula: FLOPs/token = 6*N + 12*L*d*T (N = matmul
parameters, the embedding once when tied, twice when untied), peak 989e12.

usage: hf_causal_lm.py --family bloom|llama [--layers 24 --d 1024 --heads 16 --ffn 0
                       --vocab 250880 --B 8 --T 2048 --steps 10 --warmup 3 --modes eager,compile]
"""
import argparse

import torch
from train_timing import hf_train_step, release, time_steps


def build(a):
    import transformers

    if a.family == "bloom":
        cfg = transformers.BloomConfig(vocab_size=a.vocab, hidden_size=a.d, n_layer=a.layers,
                                       n_head=a.heads, layer_norm_epsilon=1e-5,
                                       hidden_dropout=0.0, attention_dropout=0.0,
                                       tie_word_embeddings=True, use_cache=False)
        return transformers.BloomForCausalLM(cfg), 4 * a.d, True
    ffn = a.ffn or 4 * a.d
    cfg = transformers.LlamaConfig(vocab_size=a.vocab, hidden_size=a.d, intermediate_size=ffn,
                                   num_hidden_layers=a.layers, num_attention_heads=a.heads,
                                   num_key_value_heads=a.heads, rms_norm_eps=1e-5,
                                   max_position_embeddings=a.T, tie_word_embeddings=False,
                                   use_cache=False)
    return transformers.LlamaForCausalLM(cfg), ffn, False


def run(mode, a):
    torch.manual_seed(0)
    model, ffn, tied = build(a)
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, a.vocab, (a.B, a.T), device="cuda")

    step = hf_train_step(step_model, opt, input_ids=idx, labels=idx)
    dt, loss, mem = time_steps(step, a.warmup, a.steps)
    # Attention 4 d^2, MLP 2 d ffn (3 d ffn for LLaMA's gated MLP), embedding(s).
    mlp = 3 * a.d * ffn if a.family == "llama" else 2 * a.d * ffn
    n_matmul = (1 if tied else 2) * a.vocab * a.d + a.layers * (4 * a.d * a.d + mlp)
    flops_tok = 6 * n_matmul + 12 * a.layers * a.d * a.T
    tok_s = a.B * a.T / dt
    tflops = flops_tok * tok_s / 1e12
    print(f"hf-{a.family}-{mode}: {dt*1e3:.1f} ms/step  {tok_s:,.0f} tokens/s  "
          f"{tflops:.1f} TFLOP/s  MFU {100*tflops/989:.1f}%  peak mem {mem:.1f} GiB  "
          f"loss {loss:.3f}", flush=True)
    del model, opt, step_model
    release()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--family", choices=["bloom", "llama"], required=True)
    for k, v in dict(layers=24, d=1024, heads=16, ffn=0, vocab=250880, B=8, T=2048, steps=10,
                     warmup=3).items():
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--modes", default="eager,compile")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in a.modes.split(","):
        run(mode, a)


if __name__ == "__main__":
    main()
