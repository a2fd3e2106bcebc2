"""PyTorch SDPA (flash backend) forward and forward+backward on the shapes of
bench/attention_bench.cc, bf16, same FLOP count (forward 4 B H T^2 Dh, halved when causal;
forward+backward 3.5x forward). Prints one line per shape for the side-by-side table."""
import torch
import torch.nn.functional as F


def time_ms(fn, iters=20):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters


def main():
    for causal in (True, False):
        for t in (1024, 2048):
            for h, dh in ((32, 64), (16, 128)):
                b = 16384 // t
                q, k, v = (torch.randn(b, h, t, dh, device="cuda", dtype=torch.bfloat16,
                                       requires_grad=True) for _ in range(3))
                dout = torch.randn(b, h, t, dh, device="cuda", dtype=torch.bfloat16)
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    def fwd_bwd():
                        o = fwd()
                        torch.autograd.grad(o, (q, k, v), dout)
                    f_ms, fb_ms = time_ms(fwd), time_ms(fwd_bwd)
                flops = 4.0 * b * h * t * t * dh * (0.5 if causal else 1.0)
                print(f"sdpa causal={int(causal)} B={b} T={t} H={h} Dh={dh}: fwd {f_ms:.3f} ms "
                      f"{flops / f_ms / 1e9:.1f} TFLOP/s | fwd+bwd {fb_ms:.3f} ms "
                      f"{3.5 * flops / fb_ms / 1e9:.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
