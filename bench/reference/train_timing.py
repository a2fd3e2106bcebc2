"""The timed training step shared by the Hugging Face references (hf_bert.py, hf_t5.py,
hf_causal_lm.py): one step is a bf16-autocast forward returning HF's .loss, backward, optimizer
step, zero_grad; time_steps runs `warmup` untimed steps, then times `steps` on the GPU."""
import time

import torch


def hf_train_step(model, opt, **inputs):
    """A closure running one training step of an HF model on fixed inputs; returns the loss."""

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def time_steps(step, warmup, steps):
    """(seconds per step, last loss, peak GiB allocated) over `steps` timed calls of step()."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps
    return dt, loss.item(), torch.cuda.max_memory_allocated() / 2**30


def release():
    """Frees the cached blocks and resets the peak, so the next mode measures its own memory."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
