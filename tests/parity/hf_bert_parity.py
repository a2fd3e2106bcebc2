#!/usr/bin/env python3
"""Hugging Face BERT parity helper for scripts/gpu/bert_parity.sh (needs torch, transformers).

  make DIR   a BertForPreTraining with random weights (std 0.2, LayerNorms and biases random too,
             so the losses depend on every weight), eval mode (no dropout), and one batch of 4
             samples of 32 tokens: lengths 32, 20, 27, 9 (attention_mask a prefix of ones),
             token types 0 then 1, about 15% of the real tokens labelled (-100 elsewhere) and
             next_sentence_label 0, 1, 1, 0. Writes DIR/bert.safetensors: the HF state dict in
             float32 under the HF names, the batch as int32 (batch.input_ids, .token_type_ids,
             .attention_mask, .labels, .next_sentence_label) and HF's float32 losses
             (hf.mlm_loss: mean CE over the labelled tokens, hf.nsp_loss: mean CE over the
             samples; BertForPreTraining's loss is their sum). tests/model/bert_hf_parity_test
             loads it into anvil (tiny BERT, the same shapes) and compares.
             Also DIR/hf: the model's save_pretrained (config.json + model.safetensors).
  same-weights A B   B loads into BertForPreTraining (nothing missing but the tied decoder)
             with every tensor bitwise equal to A's: bin/convert's import + export of A.
  make-ref DIR   the same file from an independent pure-Python (float64) implementation of
             BertForPreTraining's forward instead of HF (no torch needed: a CI-side check of
             the name mapping and the numerics; random weights of Python's `random`).
"""
import argparse
import array
import json
import math
import os
import random
import struct

VOCAB, D, HEADS, LAYERS, FFN, MAX_POS, B, T = 100, 128, 2, 2, 512, 64, 4, 32


def make(args):
    import torch
    import transformers
    from safetensors.torch import save_file
    torch.manual_seed(11)
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, intermediate_size=FFN,
                                  max_position_embeddings=MAX_POS, type_vocab_size=2,
                                  hidden_act="gelu", layer_norm_eps=1e-12,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.BertForPreTraining(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    g = torch.Generator().manual_seed(5)
    lengths = [32, 20, 27, 9]
    ids = torch.randint(1, VOCAB, (B, T), generator=g)
    mask = torch.zeros(B, T, dtype=torch.long)
    types = torch.zeros(B, T, dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    pick = torch.rand(B, T, generator=g)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        types[b, n // 2:n] = 1
        ids[b, n:] = 0
        for t in range(1, n):
            if pick[b, t] < 0.15 or t == 1:
                labels[b, t] = int(torch.randint(0, VOCAB, (1,), generator=g))
    nsp = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
        ce = torch.nn.functional.cross_entropy
        mlm = ce(out.prediction_logits.float().view(-1, VOCAB), labels.view(-1), ignore_index=-100)
        sop = ce(out.seq_relationship_logits.float(), nsp)
        total = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels,
                      next_sentence_label=nsp).loss
    assert abs(float(total) - float(mlm + sop)) < 1e-5, (float(total), float(mlm + sop))
    # The decoder weight and bias are tied to the word embedding and cls.predictions.bias
    # (safetensors refuses shared storage): every other floating-point tensor, copied.
    tensors = {k: v.detach().float().clone().contiguous() for k, v in model.state_dict().items()
               if v.dtype.is_floating_point and not k.startswith("cls.predictions.decoder.")}
    tensors.update({
        "batch.input_ids": ids.int(), "batch.token_type_ids": types.int(),
        "batch.attention_mask": mask.int(), "batch.labels": labels.int(),
        "batch.next_sentence_label": nsp.int(),
        "hf.mlm_loss": mlm.reshape(1).float(), "hf.nsp_loss": sop.reshape(1).float(),
    })
    os.makedirs(args.dir, exist_ok=True)
    save_file(tensors, os.path.join(args.dir, "bert.safetensors"))
    model.save_pretrained(os.path.join(args.dir, "hf"))  # for `convert import`
    print(f"HF BertForPreTraining: mlm loss {float(mlm):.6f}, nsp loss {float(sop):.6f}, "
          f"total {float(total):.6f}")


# ---- make-ref: pure Python -------------------------------------------------------------------

def write_safetensors(path, tensors):
    """tensors: name -> (dtype "F32" | "I32", shape, flat list)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        blob = array.array("f" if dtype == "F32" else "i", values).tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def matmul_t(x, w, b=None):
    """x [n, k] lists, w [m, k] (nn.Linear weight): x w^T + b."""
    out = []
    for row in x:
        r = [sum(a * c for a, c in zip(row, wr)) for wr in w]
        if b is not None:
            r = [v + bb for v, bb in zip(r, b)]
        out.append(r)
    return out


def layernorm(x, g, b, eps=1e-12):
    out = []
    for row in x:
        mu = sum(row) / len(row)
        var = sum((v - mu) ** 2 for v in row) / len(row)
        inv = 1.0 / math.sqrt(var + eps)
        out.append([(v - mu) * inv * gg + bb for v, gg, bb in zip(row, g, b)])
    return out


def gelu(v):
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def log_softmax_at(logits, k):
    m = max(logits)
    return logits[k] - m - math.log(sum(math.exp(v - m) for v in logits))


def make_ref(args):
    rnd = random.Random(23)
    W = {}

    def mat(name, rows, cols, base=0.0):
        W[name] = [[base + 0.2 * rnd.gauss(0, 1) for _ in range(cols)] for _ in range(rows)]

    def vec(name, n, base=0.0):
        W[name] = [base + 0.2 * rnd.gauss(0, 1) for _ in range(n)]

    e = "bert.embeddings."
    mat(e + "word_embeddings.weight", VOCAB, D)
    mat(e + "position_embeddings.weight", MAX_POS, D)
    mat(e + "token_type_embeddings.weight", 2, D)
    vec(e + "LayerNorm.weight", D, 1.0)
    vec(e + "LayerNorm.bias", D)
    for l in range(LAYERS):
        L = f"bert.encoder.layer.{l}."
        for part in ("query", "key", "value"):
            mat(L + f"attention.self.{part}.weight", D, D)
            vec(L + f"attention.self.{part}.bias", D)
        mat(L + "attention.output.dense.weight", D, D)
        vec(L + "attention.output.dense.bias", D)
        vec(L + "attention.output.LayerNorm.weight", D, 1.0)
        vec(L + "attention.output.LayerNorm.bias", D)
        mat(L + "intermediate.dense.weight", FFN, D)
        vec(L + "intermediate.dense.bias", FFN)
        mat(L + "output.dense.weight", D, FFN)
        vec(L + "output.dense.bias", D)
        vec(L + "output.LayerNorm.weight", D, 1.0)
        vec(L + "output.LayerNorm.bias", D)
    mat("bert.pooler.dense.weight", D, D)
    vec("bert.pooler.dense.bias", D)
    mat("cls.predictions.transform.dense.weight", D, D)
    vec("cls.predictions.transform.dense.bias", D)
    vec("cls.predictions.transform.LayerNorm.weight", D, 1.0)
    vec("cls.predictions.transform.LayerNorm.bias", D)
    vec("cls.predictions.bias", VOCAB)
    mat("cls.seq_relationship.weight", 2, D)
    vec("cls.seq_relationship.bias", 2)
    # float32 weights (anvil reads float32): round once so both sides use the same values.
    for k, v in W.items():
        if isinstance(v[0], list):
            W[k] = [list(array.array("f", r)) for r in v]
        else:
            W[k] = list(array.array("f", v))

    lengths = [32, 20, 27, 9]
    ids, types, mask, labels = [], [], [], []
    for b, n in enumerate(lengths):
        for t in range(T):
            real = t < n
            ids.append(rnd.randrange(1, VOCAB) if real else 0)
            types.append(1 if real and t >= n // 2 else 0)
            mask.append(1 if real else 0)
            labels.append(rnd.randrange(VOCAB) if real and t >= 1 and (t == 1 or rnd.random() < 0.15)
                          else -100)
    nsp = [0, 1, 1, 0]
    H, Dh = HEADS, D // HEADS
    mlm_sum, mlm_n, nsp_sum = 0.0, 0, 0.0
    for b in range(B):
        rows = range(b * T, (b + 1) * T)
        x = [[W[e + "word_embeddings.weight"][ids[r]][i] + W[e + "position_embeddings.weight"][r - b * T][i]
              + W[e + "token_type_embeddings.weight"][types[r]][i] for i in range(D)] for r in rows]
        x = layernorm(x, W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"])
        n = lengths[b]
        for l in range(LAYERS):
            L = f"bert.encoder.layer.{l}."
            q, k, v = (matmul_t(x, W[L + f"attention.self.{p}.weight"], W[L + f"attention.self.{p}.bias"])
                       for p in ("query", "key", "value"))
            ctx = [[0.0] * D for _ in range(T)]
            for h in range(H):
                sl = slice(h * Dh, (h + 1) * Dh)
                for i in range(T):
                    s = [sum(a * c for a, c in zip(q[i][sl], k[j][sl])) / math.sqrt(Dh) if j < n
                         else -1e30 for j in range(T)]
                    m = max(s)
                    p = [math.exp(z - m) for z in s]
                    tot = sum(p)
                    for j in range(n):
                        w = p[j] / tot
                        for c in range(Dh):
                            ctx[i][h * Dh + c] += w * v[j][h * Dh + c]
            a = matmul_t(ctx, W[L + "attention.output.dense.weight"], W[L + "attention.output.dense.bias"])
            x = layernorm([[u + w for u, w in zip(r1, r2)] for r1, r2 in zip(x, a)],
                          W[L + "attention.output.LayerNorm.weight"], W[L + "attention.output.LayerNorm.bias"])
            f = matmul_t(x, W[L + "intermediate.dense.weight"], W[L + "intermediate.dense.bias"])
            f = [[gelu(z) for z in r] for r in f]
            o = matmul_t(f, W[L + "output.dense.weight"], W[L + "output.dense.bias"])
            x = layernorm([[u + w for u, w in zip(r1, r2)] for r1, r2 in zip(x, o)],
                          W[L + "output.LayerNorm.weight"], W[L + "output.LayerNorm.bias"])
        u = matmul_t(x, W["cls.predictions.transform.dense.weight"], W["cls.predictions.transform.dense.bias"])
        u = layernorm([[gelu(z) for z in r] for r in u], W["cls.predictions.transform.LayerNorm.weight"],
                      W["cls.predictions.transform.LayerNorm.bias"])
        logits = matmul_t(u, W[e + "word_embeddings.weight"], W["cls.predictions.bias"])
        for t in range(T):
            lab = labels[b * T + t]
            if lab >= 0:
                mlm_sum -= log_softmax_at(logits[t], lab)
                mlm_n += 1
        pooled = [math.tanh(z) for z in matmul_t([x[0]], W["bert.pooler.dense.weight"], W["bert.pooler.dense.bias"])[0]]
        z = matmul_t([pooled], W["cls.seq_relationship.weight"], W["cls.seq_relationship.bias"])[0]
        nsp_sum -= log_softmax_at(z, nsp[b])
    mlm, sop = mlm_sum / mlm_n, nsp_sum / B
    tensors = {}
    for k, v in W.items():
        if isinstance(v[0], list):
            tensors[k] = ("F32", [len(v), len(v[0])], [z for r in v for z in r])
        else:
            tensors[k] = ("F32", [len(v)], v)
    tensors.update({
        "batch.input_ids": ("I32", [B, T], ids), "batch.token_type_ids": ("I32", [B, T], types),
        "batch.attention_mask": ("I32", [B, T], mask), "batch.labels": ("I32", [B, T], labels),
        "batch.next_sentence_label": ("I32", [B], nsp),
        "hf.mlm_loss": ("F32", [1], [mlm]), "hf.nsp_loss": ("F32", [1], [sop]),
    })
    os.makedirs(args.dir, exist_ok=True)
    write_safetensors(os.path.join(args.dir, "bert.safetensors"), tensors)
    print(f"pure-Python reference: mlm loss {mlm:.6f}, nsp loss {sop:.6f}")


def same_weights(args):
    """B (bin/convert's export) loads into BertForPreTraining with nothing missing but the tied
    decoder and nothing unexpected, and every tensor equals A's (the original) bitwise."""
    import torch
    import transformers
    a = transformers.BertForPreTraining.from_pretrained(args.a).state_dict()
    model, info = transformers.BertForPreTraining.from_pretrained(args.b, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.startswith("cls.predictions.decoder.")]
    if missing or info.get("unexpected_keys") or info.get("mismatched_keys"):
        raise SystemExit(f"FAIL: loading the export: {info}")
    b = model.state_dict()
    if a.keys() != b.keys():
        raise SystemExit(f"FAIL: tensor names differ: {sorted(a.keys() ^ b.keys())}")
    bad = [k for k in a if not torch.equal(a[k], b[k])]
    if bad:
        raise SystemExit(f"FAIL: tensors differ after import + export: {bad}")
    print(f"same weights: {len(a)} tensors bitwise equal")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("make", "make-ref"):
        sub.add_parser(cmd).add_argument("dir")
    s = sub.add_parser("same-weights")
    s.add_argument("a")
    s.add_argument("b")
    args = ap.parse_args()
    {"make": make, "make-ref": make_ref, "same-weights": same_weights}[args.cmd](args)


if __name__ == "__main__":
    main()
