#!/usr/bin/python3
"""Reads a Megatron-DeepSpeed checkpoint folder that `bin/convert export-megatron` wrote with
torch itself, as the fork's tools read one (tools/convert_checkpoint/deepspeed_checkpoint.py:
degrees from the file names, `args` and `iteration` of mp_rank_00, the layer files' TP pieces
merged by concatenation; ds_to_universal.py: each param group's ZeRO partitions concatenated
over DP and cut by param_shapes), and compares every tensor with the same reading of the
fork-layout fixture (scripts/make_megatron_ds_fixture.py) it came from.

  /usr/bin/python3 scripts/check_megatron_export.py EXPORTED_DIR FIXTURE_DIR

Equal means: module weights bitwise (both fp16 roundings of the same fp32 masters), fp32
masters and Adam moments bitwise, the iteration, consumed samples/tokens, the model's args.
Not compared: the vocabulary padding rows (anvil has none: exported as zeros, the fixture's are
random) and the lr scheduler's settings (import-megatron keeps the position, not the fork's
lr / warmup / decay args). Exit 0 when equal, 1 with the differences listed, 77 (ctest's skip)
when torch is not importable.
"""
import os
import sys

try:
    import torch
except ImportError:
    print("check_megatron_export: torch is not importable: skipped")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The fixture script registers the fork's and DeepSpeed's pickled classes under their module
# names (megatron.enums, deepspeed.runtime...), as an environment with the fork installed has them.
import make_megatron_ds_fixture as fx  # noqa: E402

# deepspeed_checkpoint.py's merge: the row-parallel weights concatenated along dim 1, the
# column-parallel ones and the vocab-parallel embedding along dim 0, the rest replicated (the
# first piece kept).
CONCAT_DIM1 = ("self_attention.dense.weight", "mlp.dense_4h_to_h.weight")
CONCAT_DIM0 = ("query_key_value.weight", "query_key_value.bias", "dense_h_to_4h.weight",
               "dense_h_to_4h.bias", "word_embeddings.weight")


def merge(name, pieces):
    if name.endswith(CONCAT_DIM1):
        return torch.cat(pieces, dim=1)
    if name.endswith(CONCAT_DIM0):
        return torch.cat(pieces, dim=0)
    return pieces[0]


def fork_name(pipe, layers):
    """A pipe-module name's fork name (None: the last stage's tied embedding copy)."""
    if pipe.startswith("tied_modules.embed."):
        return pipe[len("tied_modules.embed."):]
    idx, sub = pipe.split(".", 1)
    idx = int(idx)
    if 3 <= idx < 3 + layers:
        return f"layers.{idx - 3}.{sub}"
    assert idx == 4 + layers, pipe
    return f"final_layernorm.{sub}"


def read(root):
    with open(os.path.join(root, "latest")) as f:
        d = os.path.join(root, f.read().strip())
    files = sorted(os.listdir(d))
    tp = len([f for f in files if f.startswith("layer_01-")])
    mp = len([f for f in files if f.startswith("mp_rank_")])
    pp = mp // tp
    dp = len([f for f in files if f.startswith("zero_pp_rank_")]) // mp
    sd0 = torch.load(os.path.join(d, "mp_rank_00_model_states.pt"), map_location="cpu")
    args = sd0["args"]
    out = {"degrees": (tp, pp, dp), "iteration": sd0["iteration"], "tokens": sd0["tokens"],
           "args": args, "info": sd0["checkpoint_info"]}
    # Module weights: layer_XX-model_TT files, TP pieces merged.
    weights = {}
    for key in sorted({f[:len("layer_XX")] for f in files if f.startswith("layer_")}):
        idx = int(key[len("layer_"):])
        pieces = [torch.load(os.path.join(d, f"{key}-model_{t:02d}-model_states.pt"),
                             map_location="cpu", weights_only=True) for t in range(tp)]
        for k in pieces[0]:
            name = k if idx == 1 else fork_name(f"{idx}.{k}", args.num_layers)
            weights[name] = merge(name, [x[k] for x in pieces])
    out["weights"] = weights
    # Optimizer state: per stage and TP rank, each group's partitions over DP, cut by
    # param_shapes; then TP pieces merged.
    states = {"fp32": {}, "exp_avg": {}, "exp_avg_sq": {}}
    per_tp = {s: {} for s in states}
    steps, scales = set(), set()
    for p in range(pp):
        for t in range(tp):
            m = p * tp + t
            msd = torch.load(os.path.join(d, f"mp_rank_{m:02d}_model_states.pt"),
                             map_location="cpu")
            zs = [torch.load(os.path.join(d, f"zero_pp_rank_{r}_mp_rank_{m:02d}_optim_states.pt"),
                             map_location="cpu")["optimizer_state_dict"] for r in range(dp)]
            for z in zs:
                steps.add(z["base_optimizer_state"]["param_groups"][0]["step"])
                if z["loss_scaler"] is not None:
                    scales.add(z["loss_scaler"].cur_scale)
            for g, shapes in enumerate(msd["param_shapes"]):
                flat = {
                    "fp32": torch.cat([z["single_partition_of_fp32_groups"][g] for z in zs]),
                    "exp_avg": torch.cat([z["base_optimizer_state"]["state"][g]["exp_avg"]
                                          for z in zs]),
                    "exp_avg_sq": torch.cat([z["base_optimizer_state"]["state"][g]["exp_avg_sq"]
                                             for z in zs]),
                }
                off = 0
                for pipe, shape in shapes.items():
                    n = shape.numel()
                    name = fork_name(pipe, args.num_layers)
                    if not (pipe.startswith("tied_modules") and p > 0):
                        for s in states:
                            per_tp[s].setdefault(name, {})[t] = flat[s][off:off + n].view(shape)
                    off += n
    for s in states:
        for name, pieces in per_tp[s].items():
            states[s][name] = merge(name, [pieces[t] for t in range(tp)])
    out["states"] = states
    out["steps"], out["scales"] = steps, scales
    return out


def main():
    exported, fixture = read(sys.argv[1]), read(sys.argv[2])
    errors = []
    vocab = fixture["info"]["original_vocab_size"]

    def same(what, a, b):
        if what.endswith("word_embeddings.weight"):
            a, b = a[:vocab], b[:vocab]
        if a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a, b):
            errors.append(f"{what}: exported {a.dtype} {list(a.shape)} differs from the fixture's "
                          f"{b.dtype} {list(b.shape)}")

    for k in ("iteration", "tokens"):
        if exported[k] != fixture[k]:
            errors.append(f"{k}: {exported[k]} != {fixture[k]}")
    for k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "seq_length",
              "global_batch_size", "consumed_train_samples", "consumed_valid_samples",
              "consumed_train_tokens", "seed", "layernorm_epsilon", "position_embedding_type",
              "params_dtype"):
        a, b = getattr(exported["args"], k), getattr(fixture["args"], k)
        if a != b:
            errors.append(f"args.{k}: {a} != {b}")
    if exported["info"]["original_vocab_size"] != vocab:
        errors.append("checkpoint_info.original_vocab_size differs")
    if exported["steps"] != fixture["steps"] or exported["scales"] != fixture["scales"]:
        errors.append(f"Adam step / loss scale {exported['steps']} {exported['scales']} != "
                      f"{fixture['steps']} {fixture['scales']}")
    if set(exported["weights"]) != set(fixture["weights"]):
        errors.append(f"module weights: {sorted(set(exported['weights']) ^ set(fixture['weights']))}")
    for name in sorted(set(exported["weights"]) & set(fixture["weights"])):
        same(f"weights {name}", exported["weights"][name], fixture["weights"][name])
    for s in fixture["states"]:
        a, b = exported["states"][s], fixture["states"][s]
        if set(a) != set(b):
            errors.append(f"{s}: {sorted(set(a) ^ set(b))}")
        for name in sorted(set(a) & set(b)):
            same(f"{s} {name}", a[name], b[name])
    n = sum(len(v) for v in fixture["states"].values()) + len(fixture["weights"])
    print(f"check_megatron_export: {sys.argv[1]} at TP{exported['degrees'][0]} x "
          f"PP{exported['degrees'][1]} x DP{exported['degrees'][2]} vs the fixture: {n} tensors, "
          f"{len(errors)} differences")
    for e in errors:
        print("  " + e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
