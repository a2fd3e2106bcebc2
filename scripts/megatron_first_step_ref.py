#!/usr/bin/python3
"""The first training step of a BLOOM-style GPTModelPipe resumed by Megatron-DeepSpeed (the
bigscience-workshop fork), transcribed in numpy (float64) from the fork's code, as the reference
for anvil's first step after `bin/convert import-megatron` (tests/bin/megatron_first_step_test.sh).
No torch: Debian's python3 + python3-numpy.

  /usr/bin/python3 scripts/megatron_first_step_ref.py --before CKPT/step_00000003 \\
      --after OUT/step_00000004 --data PREFIX --tensorboard TB_DIR [--index-cache DIR]

--before  the anvil checkpoint the run resumed (the import): master/, exp_avg/, exp_avg_sq/ and
          the counters (consumed_samples, optimizer_steps, lr_samples) of its manifest; the
          [model] section of its config gives the shape. Its tensors are the fork's state in
          anvil's layout; they are taken back to the fork's (query_key_value rows
          [heads][3][head_dim]) and the step is computed as the fork computes it.
--after   anvil's checkpoint after that step: its masters and moments are compared with the
          reference's.
--data    the Megatron .bin/.idx prefix both read; the batch is the fork's: the train split of
          the documents (args.split), the fork's index mappings (megatron/data/gpt_dataset.py
          _build_index_mappings, BigScience's cutoff_last_epoch 0.95, with args.train_samples,
          seq_length and seed: scripts/make_gpt_index_fixture.py's transcription), and the
          MegatronPretrainingSampler's samples consumed_samples .. consumed_samples +
          global_batch - 1 (every DP rank's micro-batches together).
--tensorboard  anvil's [log] tensorboard_dir: "lm-loss-training/lm loss" at the step is
          compared with the reference's loss (float32 as written).
--index-cache  anvil's [data] cache_dir: its *_train_indexmap_* npy files must equal the
          transcription's (the batch is the fork's, not merely the same on both sides).
--vocab-rows N  (default: every row of wte) how many rows of the embedding the softmax spans:
          the fork's is the whole padded vocabulary, which an import with --keep-vocab-padding
          keeps; the default import drops the padding rows, and this is then its row count.

The fork's forward (megatron/model/gpt_model.py GPTModelPipe, transformer.py, language_model.py,
mpu/layers.py, fused_bias_gelu.py), dropout 0 as the fixture's args:
  x = word_embeddings[tokens]; x = LayerNorm(x) (embed_layernorm: VocabParallelEmbedding.norm)
  per layer: a = LN1(x); qkv = a W^T + b viewed [T, heads, 3 head_dim] -> q, k, v;
    scores = alibi/layer_number + q k^T / (sqrt(head_dim) layer_number), scaled by layer_number
    (apply_query_key_layer_scaling, softmax in fp32) = q k^T / sqrt(head_dim) + slope_h * j,
    causal mask (masked_fill -10000), softmax; context heads concatenated; x += dense(context);
    x += dense_4h_to_h(bias_gelu(dense_h_to_4h(LN2(x)))) with the tanh GELU of fused_bias_gelu.py
    (0.79788456, 0.044715)
  final LayerNorm; logits = x word_embeddings^T (tied head) over the padded vocabulary;
  loss = mean over every token of the global batch of vocab_parallel_cross_entropy (loss_mask
  all ones: each micro-batch's sum / its token count, averaged over micro-batches and DP ranks,
  which is the same mean as all micro-batches hold as many tokens).
ALiBi slopes: _build_alibi_tensor's get_slopes. LayerNorm: (x - mean) / sqrt(var + eps) w + b.
The step (DeepSpeed's ZeRO-1 / BF16 optimizer over apex FusedAdam, adam_w_mode):
  g = the gradient of the loss (the tied embedding's from both uses), global L2 norm over every
  parameter once; clip = (norm + 1e-6) / clip_grad, g /= clip when clip > 1
  (stage_1_and_2.py unscale_and_clip_grads); lr = AnnealingLR.get_lr() at num_steps = the
  consumed samples (learning_rates.py: warmup, then cosine to min_lr over lr_decay_samples);
  t = the checkpoint's Adam step + 1; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  p -= lr ((m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd p), wd = args.weight_decay for
  weights, 0 for biases and LayerNorms (_get_params_for_weight_decay_optimization).
The fork's args are the fixture's (scripts/make_megatron_ds_fixture.py make_args): FORK_ARGS.

Tolerances (anvil runs the step in float32; the reference in float64 from the same float32
state), "f32 rounding" made explicit:
  loss: relative 2e-6 (a float32 forward of sums over at most a few hundred terms: ~30 ulp);
  the gradient: each element may be off by dg = 2e-6 x the largest |g| of its tensor (~30 ulp
    of that element: a float32 gradient element is a sum of float32 products whose rounding is
    relative to the largest terms, not to the sum, which may cancel to ~0);
  exp_avg: 4 ulp of b1 |m| + (1 - b1) |g| (the terms it adds) + (1 - b1) dg;
  exp_avg_sq: 4 ulp of b2 v + (1 - b2) g^2 + (1 - b2) (2 |g| dg + dg^2);
  weights: 4 ulp(|p|) + lr x the first-order change of m_hat / (sqrt(v_hat) + eps) that those
    moment errors make (elements with a tiny v_hat are the sensitive ones, and get a wider bound
    the same way the float32 computation there is less determined).
Exit status 0 when all agree, 1 otherwise (every element over its bound is named; the three
largest error / bound ratios are printed).
"""
import argparse
import configparser
import glob
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "gpu"))
import make_gpt_index_fixture as gidx  # noqa: E402  (the fork's GPT index, numpy)
import make_idx_fixture  # noqa: E402
import tensorboard_check  # noqa: E402  (a minimal TensorBoard event reader)

# The fork's args of the fixture checkpoint (make_megatron_ds_fixture.py make_args).
FORK_ARGS = dict(lr=6e-4, min_lr=6e-5, lr_decay_style="cosine", lr_warmup_samples=16,
                 lr_decay_samples=640, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95,
                 adam_eps=1e-8, clip_grad=1.0, train_samples=800, split="969, 30, 1",
                 global_batch_size=8, seed=42, seq_length=8)


# --- anvil checkpoints (io/checkpoint.h): manifest.json + rank_*.safetensors -----------------
def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for key, h in header.items():
        if key == "__metadata__":
            continue
        assert h["dtype"] == "F32", (path, key, h["dtype"])
        a, b = h["data_offsets"]
        out[key] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype="<f4").reshape(h["shape"])
    return out


def read_checkpoint(step_dir):
    """(manifest, {name: float32 array}) with every tensor assembled from its pieces."""
    with open(os.path.join(step_dir, "manifest.json")) as f:
        man = json.load(f)
    files = {}
    tensors = {}
    for name, t in man["tensors"].items():
        whole = np.full(t["shape"], np.nan, dtype=np.float32)
        for piece in t["pieces"]:
            fn = piece["file"]
            if fn not in files:
                files[fn] = read_safetensors(os.path.join(step_dir, fn))
            data = files[fn][piece["key"]]
            sl = tuple(slice(o, o + e) for o, e in zip(piece["offset"], piece["extent"]))
            whole[sl] = data.reshape(piece["extent"])
        assert not np.isnan(whole).any(), f"{step_dir}: {name} not fully covered by its pieces"
        tensors[name] = whole
    return man, tensors


def model_config(man):
    cp = configparser.ConfigParser()
    cp.read_string(man["config"])
    m = cp["model"]
    return dict(layers=int(m["n_layers"]), d=int(m["d_model"]), heads=int(m["n_heads"]),
                eps=float(m.get("ln_eps", "1e-5")))


# --- layouts -----------------------------------------------------------------------------------
def qkv_to_fork(t, heads):
    """anvil's c_attn rows [3][heads][hd] -> the fork's query_key_value rows [heads][3][hd]."""
    rows = t.shape[0]
    hd = rows // (3 * heads)
    return t.reshape(3, heads, hd, -1).transpose(1, 0, 2, 3).reshape(t.shape)


def qkv_to_anvil(t, heads):
    rows = t.shape[0]
    hd = rows // (3 * heads)
    return t.reshape(heads, 3, hd, -1).transpose(1, 0, 2, 3).reshape(t.shape)


def fork_params(st, cfg, prefix):
    """anvil tensors (prefix + name) -> the fork's names and layouts, float64."""
    p = {}
    for name, t in st.items():
        if not name.startswith(prefix):
            continue
        n = name[len(prefix):]
        t = t.astype(np.float64)
        if n.endswith("attn.c_attn.weight") or n.endswith("attn.c_attn.bias"):
            t = qkv_to_fork(t, cfg["heads"])
        p[n] = t
    return p


# --- the fork's forward and its gradient ------------------------------------------------------
def get_slopes(n):  # transformer.py _build_alibi_tensor
    def get_slopes_power_of_2(n):
        start = (2 ** (-2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(
        2 * closest_power_of_2)[0::2][:n - closest_power_of_2]


def ln_fwd(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    return xhat * w + b, (xhat, rstd, w)


def ln_bwd(dy, cache):
    xhat, rstd, w = cache
    dxhat = dy * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    red = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(red), dy.sum(red)


def gelu_fwd(x):  # fused_bias_gelu.py bias_gelu
    return x * 0.5 * (1.0 + np.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def gelu_bwd(g, x):  # bias_gelu_back
    tanh_out = np.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + \
        0.5 * (1 + tanh_out)
    return ff * g


def loss_and_grads(p, cfg, tokens, labels, vocab_rows):
    """The mean cross-entropy over every token of the batch and d loss / d p (float64)."""
    B, T = tokens.shape
    d, H, L, eps = cfg["d"], cfg["heads"], cfg["layers"], cfg["eps"]
    hd = d // H
    E = p["wte.weight"]
    g = {k: np.zeros_like(v) for k, v in p.items()}
    slopes = np.array(get_slopes(H))
    alibi = slopes[:, None, None] * np.arange(T)[None, None, :]        # [H, 1, T]
    causal = np.tril(np.ones((T, T), dtype=bool))
    x0 = E[tokens]                                                      # [B, T, d]
    x, c_emb = ln_fwd(x0, p["wte_ln.weight"], p["wte_ln.bias"], eps)
    caches = []
    for i in range(L):
        pre = f"h.{i}."
        a, c1 = ln_fwd(x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], eps)
        qkv = a @ p[pre + "attn.c_attn.weight"].T + p[pre + "attn.c_attn.bias"]
        qkv = qkv.reshape(B, T, H, 3 * hd)                              # [sq, b, np, 3 hn] view
        q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
        s = np.einsum("bihe,bjhe->bhij", q, k) / math.sqrt(hd) + alibi[None]
        s = np.where(causal, s, -10000.0)
        s = s - s.max(-1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(-1, keepdims=True)
        ctx = np.einsum("bhij,bjhe->bihe", pr, v).reshape(B, T, d)
        x1 = x + ctx @ p[pre + "attn.c_proj.weight"].T + p[pre + "attn.c_proj.bias"]
        m, c2 = ln_fwd(x1, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], eps)
        u = m @ p[pre + "mlp.c_fc.weight"].T + p[pre + "mlp.c_fc.bias"]
        gu = gelu_fwd(u)
        x2 = x1 + gu @ p[pre + "mlp.c_proj.weight"].T + p[pre + "mlp.c_proj.bias"]
        caches.append((a, c1, q, k, v, pr, ctx, m, c2, u, gu))
        x = x2
    hf, c_f = ln_fwd(x, p["ln_f.weight"], p["ln_f.bias"], eps)
    logits = hf @ E[:vocab_rows].T                                      # [B, T, V]
    mx = logits.max(-1, keepdims=True)
    z = np.exp(logits - mx)
    lse = np.log(z.sum(-1, keepdims=True)) + mx
    n = B * T
    lab = labels.reshape(-1)
    loss = float((lse.reshape(-1) - logits.reshape(n, -1)[np.arange(n), lab]).mean())
    dlog = z / z.sum(-1, keepdims=True)
    dlog.reshape(n, -1)[np.arange(n), lab] -= 1.0
    dlog /= n
    g["wte.weight"][:vocab_rows] += np.einsum("btv,btd->vd", dlog, hf)
    dx = dlog @ E[:vocab_rows]
    dx, g["ln_f.weight"], g["ln_f.bias"] = ln_bwd(dx, c_f)
    for i in reversed(range(L)):
        pre = f"h.{i}."
        a, c1, q, k, v, pr, ctx, m, c2, u, gu = caches[i]
        # MLP
        dgu = dx @ p[pre + "mlp.c_proj.weight"]
        g[pre + "mlp.c_proj.weight"] += np.einsum("bto,bti->oi", dx, gu)
        g[pre + "mlp.c_proj.bias"] += dx.sum((0, 1))
        du = gelu_bwd(dgu, u)
        g[pre + "mlp.c_fc.weight"] += np.einsum("bto,bti->oi", du, m)
        g[pre + "mlp.c_fc.bias"] += du.sum((0, 1))
        dm = du @ p[pre + "mlp.c_fc.weight"]
        dx1, dw, db = ln_bwd(dm, c2)
        g[pre + "ln_2.weight"] += dw
        g[pre + "ln_2.bias"] += db
        dx1 = dx1 + dx
        # attention
        dctx = dx1 @ p[pre + "attn.c_proj.weight"]
        g[pre + "attn.c_proj.weight"] += np.einsum("bto,bti->oi", dx1, ctx)
        g[pre + "attn.c_proj.bias"] += dx1.sum((0, 1))
        dctx = dctx.reshape(B, T, H, hd)
        dpr = np.einsum("bihe,bjhe->bhij", dctx, v)
        dv = np.einsum("bhij,bihe->bjhe", pr, dctx)
        ds = pr * (dpr - (pr * dpr).sum(-1, keepdims=True)) / math.sqrt(hd)
        dq = np.einsum("bhij,bjhe->bihe", ds, k)
        dk = np.einsum("bhij,bihe->bjhe", ds, q)
        dqkv = np.concatenate([dq, dk, dv], axis=-1).reshape(B, T, 3 * d)
        g[pre + "attn.c_attn.weight"] += np.einsum("bto,bti->oi", dqkv, a)
        g[pre + "attn.c_attn.bias"] += dqkv.sum((0, 1))
        da = dqkv @ p[pre + "attn.c_attn.weight"]
        dxa, dw, db = ln_bwd(da, c1)
        g[pre + "ln_1.weight"] += dw
        g[pre + "ln_1.bias"] += db
        dx = dx1 + dxa
    dx0, g["wte_ln.weight"], g["wte_ln.bias"] = ln_bwd(dx, c_emb)
    np.add.at(g["wte.weight"], tokens.reshape(-1), dx0.reshape(-1, d))
    return loss, g


# --- the step -----------------------------------------------------------------------------------
def annealing_lr(num_steps, a):
    """megatron/learning_rates.py AnnealingLR.get_lr (samples; no token decay)."""
    warm, decay = a["lr_warmup_samples"], a["lr_decay_samples"]
    if warm > 0 and num_steps <= warm:
        return a["lr"] * float(num_steps) / float(warm)
    if a["lr_decay_style"] == "constant":
        return a["lr"]
    if num_steps > decay:
        return a["min_lr"]
    ratio = float(num_steps - warm) / float(decay - warm)
    coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0) if a["lr_decay_style"] == "cosine" \
        else 1.0 - ratio
    return a["min_lr"] + coeff * (a["lr"] - a["min_lr"])


def no_decay(name):  # LayerNorms and biases (megatron/optimizer/__init__.py)
    return name.endswith(".bias") or name.split(".")[-2].startswith("ln") or \
        name.startswith("wte_ln.")


def adam_step(p, g, m, v, step, lr, a):
    """(new p, m, v, the gradient norm, the clipped gradient)."""
    norm = math.sqrt(sum(float((x * x).sum()) for x in g.values()))
    clip = (norm + 1e-6) / a["clip_grad"]
    if a["clip_grad"] > 0 and clip > 1:
        g = {k: x / clip for k, x in g.items()}
    b1, b2, eps = a["adam_beta1"], a["adam_beta2"], a["adam_eps"]
    t = step + 1
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    out_p, out_m, out_v = {}, {}, {}
    for k in p:
        wd = 0.0 if no_decay(k) else a["weight_decay"]
        mk = b1 * m[k] + (1 - b1) * g[k]
        vk = b2 * v[k] + (1 - b2) * g[k] * g[k]
        update = (mk / bc1) / (np.sqrt(vk / bc2) + eps) + wd * p[k]
        out_p[k], out_m[k], out_v[k] = p[k] - lr * update, mk, vk
    return out_p, out_m, out_v, norm, g


# --- the batch ----------------------------------------------------------------------------------
def fork_batch(prefix, consumed, a, cache_dir):
    """The fork's global batch at `consumed` samples: (tokens, labels) [global_batch, seq]."""
    _, seqs, _ = make_idx_fixture.read_back(prefix)
    sizes = np.array([len(s) for s in seqs], dtype=np.int32)
    splits = gidx.get_train_valid_test_split_(a["split"], len(seqs))
    documents = np.arange(start=splits[0], stop=splits[1], step=1, dtype=np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        doc_idx, sample_idx, shuffle_idx, _, _ = gidx.build_index_mappings(
            "train", prefix, documents, sizes, a["train_samples"], a["seq_length"], a["seed"],
            tmp)
        if cache_dir:
            for f in sorted(glob.glob(os.path.join(tmp, "*.npy"))):
                theirs = os.path.join(cache_dir, os.path.basename(f))
                if not os.path.exists(theirs):
                    sys.exit(f"FAIL: anvil's index cache has no {os.path.basename(f)}")
                if not np.array_equal(np.load(f), np.load(theirs)):
                    sys.exit(f"FAIL: anvil's {os.path.basename(f)} differs from the fork's")
    ds = gidx.GPTDataset(seqs, doc_idx, sample_idx, shuffle_idx)
    samples = np.stack([ds[i] for i in range(consumed, consumed + a["global_batch_size"])])
    return samples[:, :-1], samples[:, 1:]


# --- main ---------------------------------------------------------------------------------------
def ulp(x):
    return np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--tensorboard", required=True)
    ap.add_argument("--index-cache", default="")
    ap.add_argument("--vocab-rows", type=int, default=0)
    args = ap.parse_args()
    a = FORK_ARGS
    man0, st0 = read_checkpoint(args.before)
    man1, st1 = read_checkpoint(args.after)
    cfg = model_config(man0)
    s = man0["state"]
    consumed, step = s["consumed_samples"], s["optimizer_steps"]
    p = fork_params(st0, cfg, "master/")
    m = fork_params(st0, cfg, "exp_avg/")
    v = fork_params(st0, cfg, "exp_avg_sq/")
    vocab_rows = args.vocab_rows or p["wte.weight"].shape[0]
    tokens, labels = fork_batch(args.data, consumed, a, args.index_cache)
    assert tokens.max() < vocab_rows, "a token outside the softmax's rows"
    loss, g = loss_and_grads(p, cfg, tokens, labels, vocab_rows)
    lr = annealing_lr(s["lr_samples"], a)
    p1, m1, v1, norm, gc = adam_step(p, g, m, v, step, lr, a)
    print(f"reference: loss {loss:.9f} grad norm {norm:.9f} lr {lr:.9e} Adam step {step + 1} "
          f"(samples {consumed} .. {consumed + a['global_batch_size'] - 1})")
    ok = True
    # The loss anvil logged at the step after the checkpoint's.
    want_step = man0["step"] + 1
    tb = tensorboard_check.read_minimal(
        sorted(glob.glob(os.path.join(args.tensorboard, "*tfevents*"))))
    got = [val for st, val in tb.get("lm-loss-training/lm loss", []) if st == want_step]
    if len(got) != 1:
        print(f"FAIL: {len(got)} 'lm-loss-training/lm loss' scalars at step {want_step}")
        ok = False
    else:
        rel = abs(got[0] - loss) / abs(loss)
        print(f"loss: anvil {got[0]:.9f} reference {loss:.9f} relative {rel:.2e}")
        if rel > 2e-6:
            print("FAIL: the loss differs by more than 2e-6 relative")
            ok = False
    worst = {}
    b1, b2 = a["adam_beta1"], a["adam_beta2"]
    bc1, bc2 = 1 - b1 ** (step + 1), 1 - b2 ** (step + 1)
    for k in p1:
        gk = np.abs(gc[k])
        dg = 2e-6 * gk.max()  # the float32 gradient's error: ~30 ulp of the largest element
        bm = 4 * ulp(b1 * np.abs(m[k]) + (1 - b1) * gk) + (1 - b1) * dg
        bv = 4 * ulp(b2 * v[k] + (1 - b2) * gk * gk) + (1 - b2) * (2 * gk * dg + dg * dg)
        sq = np.maximum(np.sqrt(v1[k] / bc2), 1e-30)
        ddir = bm / bc1 / (sq + a["adam_eps"]) + \
            np.abs(m1[k] / bc1) * (bv / bc2) / (2 * sq * (sq + a["adam_eps"]) ** 2)
        bp = 4 * ulp(p1[k]) + lr * ddir
        for prefix, ref, bound in [("master/", p1[k], bp), ("exp_avg/", m1[k], bm),
                                   ("exp_avg_sq/", v1[k], bv)]:
            if k.endswith("attn.c_attn.weight") or k.endswith("attn.c_attn.bias"):
                ref = qkv_to_anvil(ref, cfg["heads"])
                bound = qkv_to_anvil(bound, cfg["heads"])
            got = st1[prefix + k].astype(np.float64)
            err = np.abs(got - ref)
            ratio = float((err / bound).max())
            worst[prefix + k] = ratio
            if ratio > 1:
                i = np.unravel_index(np.argmax(err / bound), ref.shape)
                print(f"FAIL: {prefix + k}{list(i)}: anvil {got[i]!r} reference {ref[i]!r} "
                      f"(error {err[i]:.3e} > bound {bound[i]:.3e})")
                ok = False
    top = sorted(worst.items(), key=lambda x: -x[1])[:3]
    print("largest error / bound: " + ", ".join(f"{k} {x:.3f}" for k, x in top))
    print("megatron_first_step_ref: " + ("OK" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
