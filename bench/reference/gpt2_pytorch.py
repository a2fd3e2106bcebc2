#!/usr/bin/env python3
"""PyTorch reference for anvil's GPT step benchmark (run on the GPU machine, same run).

Same model as anvil's GPT-2 (pre-LN, learned positions, tied embeddings, GELU-tanh, vocab padded
to a multiple of 128), bf16 autocast, SDPA (flash) causal attention, fused AdamW with f32
weights. Prints one line per mode with ms/step, tokens/s, TFLOP/s and MFU computed with anvil's
formula: FLOPs/token = 6*N + 12*L*d*T (N = matmul params incl. the tied embedding), peak 989e12.

usage: gpt2_pytorch.py [--layers 12 --d 768 --heads 12 --vocab 50257 --B 32 --T 1024]
                       [--steps 20 --warmup 5 --modes eager,compile]
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, T, d, heads, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(T, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        for name, p in self.named_parameters():  # GPT-2 init, as anvil's
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def run(mode, a):
    torch.manual_seed(0)
    padded = (a.vocab + 127) // 128 * 128
    model = GPT(padded, a.T, a.d, a.heads, a.layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, a.vocab, (a.B, a.T), device="cuda")
    tgt = torch.randint(0, a.vocab, (a.B, a.T), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / a.steps
    n_matmul = padded * a.d + a.layers * (12 * a.d * a.d)
    flops_tok = 6 * n_matmul + 12 * a.layers * a.d * a.T
    tok_s = a.B * a.T / dt
    tflops = flops_tok * tok_s / 1e12
    mem = torch.cuda.max_memory_allocated() / 2**30
    print(f"pytorch-{mode}: {dt*1e3:.1f} ms/step  {tok_s:,.0f} tokens/s  {tflops:.1f} TFLOP/s  "
          f"MFU {100*tflops/989:.1f}%  peak mem {mem:.1f} GiB  loss {loss.item():.3f}", flush=True)
    del model, opt, step_model
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def main():
    p = argparse.ArgumentParser()
    for k, v in dict(layers=12, d=768, heads=12, vocab=50257, B=32, T=1024, steps=20,
                     warmup=5).items():
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--modes", default="eager,compile")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in a.modes.split(","):
        run(mode, a)


if __name__ == "__main__":
    main()
