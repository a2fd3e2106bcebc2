#!/usr/bin/python3
"""Writes the .pt fixtures of tests/io/torch_pt_test.cc with torch itself (Debian's
python3-torch 1.13: `apt-get install python3-torch`, run with /usr/bin/python3). The C++ test
reads them without torch and compares with values it computes from the formulas below.

  basic.pt          values of every kind torch.save of a Megatron-DeepSpeed checkpoint uses:
                    tensors (float32 [2, 3] = arange(6) * 0.5 - 1, its row 1 as a view,
                    float16 and bfloat16 copies, int64 arange(4)), an OrderedDict, an
                    argparse.Namespace with a torch dtype and a megatron.enums member, torch.Size,
                    a set, a large int, a float, None, bools, nested lists and tuples.
  proto4.pt         the same dict saved with pickle_protocol=4 (opcodes outside the subset).
  bad_global.pt     a dict holding a datetime.date (a global outside the whitelist).
  complex.pt        a complex64 tensor (a storage type outside the subset).

  /usr/bin/python3 scripts/make_megatron_ds_fixture.py tests/io/fixtures/megatron_ds
  /usr/bin/python3 scripts/make_megatron_ds_fixture.py --check FILE.pt   # torch.load a file
  ckpt/             a Megatron-DeepSpeed checkpoint folder as the fork (GPTModelPipe under
                    DeepSpeed's PipelineEngine, fp16, ZeRO-1) saves it at TP2 x PP2 x DP2 of a
                    BLOOM-style tiny model (ALiBi, embedding LayerNorm, tied head, vocabulary 120
                    padded to 128, fused QKV rows [heads, 3, head_dim]): ckpt/latest,
                    ckpt/global_step3/layer_XX-model_YY-model_states.pt (fp16 weights; 01 the
                    embedding, 03..06 the layers, 08 the final LayerNorm), mp_rank_YY_model_states.pt
                    (YY = pp * tp_size + tp: args, iteration, tokens, lr_scheduler, param_shapes,
                    checkpoint_info, rng states), zero_pp_rank_D_mp_rank_YY_optim_states.pt (the
                    ZeRO-1 flat fp32 partitions and Adam moments of the three param groups; the
                    Adam step 3: iterations 3, 1 skipped, + the zero-gradient step DeepSpeed's
                    initialize_optimizer_states takes, which apex's FusedAdam counts).
  ckpt/global_step3_universal/, ckpt/latest_universal
                    the fork's tools/convert_checkpoint/ds_to_universal.py run on ckpt/global_step3
                    (write_universal: its extraction of each ZeRO file's fragments by
                    param_slice_mappings and its TP merge, step by step): zero/<pipe-module
                    name>/{fp32,exp_avg,exp_avg_sq}.pt = {"cat_dim"?,
                    "vocab_divisibility_padding_tensor"?, "param"}, the mp_rank files copied.
  ckpt_bf16/        the same state saved by a --bf16 run (DeepSpeed's BF16_Optimizer at ZeRO stage
                    0, as tr11 BLOOM) at TP1 x PP2 x DP3: bf16 layer files and
                    bf16_zero_pp_rank_D_mp_rank_YY_optim_states.pt (bf16_optimizer.py's
                    state_dict: the fp32 partitions keep the alignment padding, 2 elements at the
                    end of each group's last partition here; group_paddings; no loss scaler;
                    Adam step 4, no skipped steps).
  expected.safetensors  the same state in anvil's names and layout (master/, exp_avg/,
                    exp_avg_sq/ + the anvil name; c_attn rows q|k|v of all heads; the vocabulary
                    padding rows dropped), computed here independently of the C++ import.
"""
import argparse
import collections
import dataclasses
import datetime
import enum
import json
import os
import re
import shutil
import struct
import sys
import types

import torch


def fake_module(name, **attrs):
    """A module under the fork's name, so pickle records the fork's global names."""
    m = types.ModuleType(name)
    for k, v in attrs.items():
        v.__module__ = name
        setattr(m, k, v)
    sys.modules[name] = m
    return m


class PositionEmbeddingType(enum.Enum):  # megatron/enums.py
    rotary = 1
    absolute = 2
    alibi = 3


fake_module("megatron")
fake_module("megatron.enums", PositionEmbeddingType=PositionEmbeddingType)


# DeepSpeed's records, under their module names (deepspeed/runtime/fp16/loss_scaler.py,
# deepspeed/runtime/zero/config.py, deepspeed/utils/tensor_fragment.py).
class DynamicLossScaler:
    pass


class ZeroStageEnum(int, enum.Enum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3


@dataclasses.dataclass
class fragment_address:  # noqa: N801 (DeepSpeed's name)
    numel: int
    start: int


for _m in ["deepspeed", "deepspeed.runtime", "deepspeed.runtime.fp16", "deepspeed.runtime.zero",
           "deepspeed.utils"]:
    fake_module(_m)
fake_module("deepspeed.runtime.fp16.loss_scaler", DynamicLossScaler=DynamicLossScaler)
fake_module("deepspeed.runtime.zero.config", ZeroStageEnum=ZeroStageEnum)
fake_module("deepspeed.utils.tensor_fragment", fragment_address=fragment_address)

@dataclasses.dataclass
class Layout:
    """How a checkpoint was saved: the degrees and the optimizer (fp16 ZeRO-1, or bf16 with
    DeepSpeed's BF16_Optimizer at ZeRO stage 0, as tr11 BLOOM ran)."""
    tp: int
    pp: int
    dp: int
    bf16: bool = False


# The tiny BLOOM-style model and the layouts.
TP, PP, DP = 2, 2, 2
FP16 = Layout(TP, PP, DP)
BF16 = Layout(1, 2, 3, bf16=True)  # DP3: alignment padding of 2 x 3 in the partitions
LAYERS, HIDDEN, HEADS, FFN = 4, 16, 4, 64
VOCAB, DIVISIBLE_BY = 120, 16
PADDED = ((VOCAB + DIVISIBLE_BY * TP - 1) // (DIVISIBLE_BY * TP)) * (DIVISIBLE_BY * TP)  # 128
assert PADDED == ((VOCAB + DIVISIBLE_BY * BF16.tp - 1) // (DIVISIBLE_BY * BF16.tp)) * (
    DIVISIBLE_BY * BF16.tp)
ITERATION, GLOBAL_BATCH, SEQ = 3, 8, 8
HD = HIDDEN // HEADS


def full_state(gen):
    """The whole model's fp32 master weights in the fork's names and layouts (qkv rows
    [heads, 3, head_dim], embedding [PADDED, HIDDEN] with nonzero padding rows)."""
    def rnd(*shape, scale=0.02):
        return torch.randn(*shape, generator=gen) * scale
    st = collections.OrderedDict()
    st["word_embeddings.weight"] = rnd(PADDED, HIDDEN)
    st["word_embeddings.norm.weight"] = 1 + rnd(HIDDEN)
    st["word_embeddings.norm.bias"] = rnd(HIDDEN)
    for i in range(LAYERS):
        p = f"layers.{i}."
        st[p + "input_layernorm.weight"] = 1 + rnd(HIDDEN)
        st[p + "input_layernorm.bias"] = rnd(HIDDEN)
        st[p + "self_attention.query_key_value.weight"] = rnd(3 * HIDDEN, HIDDEN)
        st[p + "self_attention.query_key_value.bias"] = rnd(3 * HIDDEN)
        st[p + "self_attention.dense.weight"] = rnd(HIDDEN, HIDDEN)
        st[p + "self_attention.dense.bias"] = rnd(HIDDEN)
        st[p + "post_attention_layernorm.weight"] = 1 + rnd(HIDDEN)
        st[p + "post_attention_layernorm.bias"] = rnd(HIDDEN)
        st[p + "mlp.dense_h_to_4h.weight"] = rnd(FFN, HIDDEN)
        st[p + "mlp.dense_h_to_4h.bias"] = rnd(FFN)
        st[p + "mlp.dense_4h_to_h.weight"] = rnd(HIDDEN, FFN)
        st[p + "mlp.dense_4h_to_h.bias"] = rnd(HIDDEN)
    st["final_layernorm.weight"] = 1 + rnd(HIDDEN)
    st["final_layernorm.bias"] = rnd(HIDDEN)
    return st


ROW_PARALLEL = ("self_attention.dense.weight", "mlp.dense_4h_to_h.weight")
COLUMN_PARALLEL = ("query_key_value.weight", "query_key_value.bias", "dense_h_to_4h.weight",
                   "dense_h_to_4h.bias", "word_embeddings.weight")


def tp_slice(name, t, tp, tp_size=TP):
    """Rank tp's part: column-parallel (and the vocab-parallel embedding) split rows,
    row-parallel weights split columns, the rest is replicated (megatron/mpu/layers.py)."""
    if name.endswith(ROW_PARALLEL):
        return t.chunk(tp_size, dim=1)[tp].clone()
    if name.endswith(COLUMN_PARALLEL):
        return t.chunk(tp_size, dim=0)[tp].clone()
    return t.clone()


def stage_layers(pp, pp_size=PP):
    per = LAYERS // pp_size
    return list(range(pp * per, (pp + 1) * per))


def stage_params(pp, pp_size=PP):
    """(pipe-module name, fork name, is LayerNorm) of stage pp, in module.modules() order:
    tied_modules first (registered before _build), then the layers by spec index."""
    out = [("tied_modules.embed.word_embeddings.weight", "word_embeddings.weight", False)]
    if pp == 0:  # the embedding LayerNorm exists on the first stage only
        out += [("tied_modules.embed.word_embeddings.norm.weight", "word_embeddings.norm.weight",
                 True),
                ("tied_modules.embed.word_embeddings.norm.bias", "word_embeddings.norm.bias", True)]
    for i in stage_layers(pp, pp_size):
        idx = 3 + i
        for sub, ln in [("input_layernorm.weight", True), ("input_layernorm.bias", True),
                        ("self_attention.query_key_value.weight", False),
                        ("self_attention.query_key_value.bias", False),
                        ("self_attention.dense.weight", False), ("self_attention.dense.bias", False),
                        ("post_attention_layernorm.weight", True),
                        ("post_attention_layernorm.bias", True),
                        ("mlp.dense_h_to_4h.weight", False), ("mlp.dense_h_to_4h.bias", False),
                        ("mlp.dense_4h_to_h.weight", False), ("mlp.dense_4h_to_h.bias", False)]:
            out.append((f"{idx}.{sub}", f"layers.{i}.{sub}", ln))
    if pp == pp_size - 1:
        idx = 3 + LAYERS + 1
        out += [(f"{idx}.weight", "final_layernorm.weight", True),
                (f"{idx}.bias", "final_layernorm.bias", True)]
    return out


def param_groups(pp, pp_size=PP):
    """megatron/optimizer/__init__.py _get_params_for_weight_decay_optimization: weights
    (not LayerNorm, not bias) split in two halves, then LayerNorms and biases (decay 0)."""
    wd = [p for p in stage_params(pp, pp_size) if not p[2] and not p[0].endswith("bias")]
    no_wd = [p for p in stage_params(pp, pp_size) if p[2] or p[0].endswith("bias")]
    n = len(wd)
    return [wd[:n // 2], wd[n // 2:], no_wd]


def make_args(lay=FP16):
    return argparse.Namespace(
        num_layers=LAYERS, hidden_size=HIDDEN, ffn_hidden_size=FFN, num_attention_heads=HEADS,
        kv_channels=HD, seq_length=SEQ, max_position_embeddings=SEQ,
        position_embedding_type=PositionEmbeddingType.alibi, embed_layernorm=True,
        make_vocab_size_divisible_by=DIVISIBLE_BY, padded_vocab_size=PADDED,
        tokenizer_type="PretrainedFromHF", tensor_model_parallel_size=lay.tp,
        pipeline_model_parallel_size=lay.pp, data_parallel_size=lay.dp, micro_batch_size=2,
        global_batch_size=GLOBAL_BATCH, rampup_batch_size=None, train_samples=800,
        lr=6e-4, min_lr=6e-5, lr_decay_style="cosine", lr_warmup_samples=16,
        lr_decay_samples=640, lr_decay_tokens=None, lr_warmup_tokens=None, weight_decay=0.1,
        adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, clip_grad=1.0, fp16=not lay.bf16,
        bf16=lay.bf16, params_dtype=torch.bfloat16 if lay.bf16 else torch.float16,
        loss_scale=None, initial_loss_scale=4096,
        min_loss_scale=1.0, loss_scale_window=500, hysteresis=2, seed=42,
        layernorm_epsilon=1e-5, hidden_dropout=0.0, attention_dropout=0.0, init_method_std=0.02,
        apply_residual_connection_post_layernorm=False, bias_gelu_fusion=True,
        openai_gelu=False, glu_activation=None, apply_query_key_layer_scaling=True,
        deepspeed=True, zero_stage=0 if lay.bf16 else 1, pp_partition_method=None,
        eval_interval=1000,
        eval_iters=1, iteration=ITERATION, consumed_train_samples=ITERATION * GLOBAL_BATCH,
        consumed_valid_samples=0, consumed_train_tokens=ITERATION * GLOBAL_BATCH * SEQ)


def make_state(gen):
    """The fp32 masters and Adam moments every fixture checkpoint holds (one run's state)."""
    master = full_state(gen)
    exp_avg = {k: torch.randn(v.shape, generator=gen) * 1e-3 for k, v in master.items()}
    exp_avg_sq = {k: torch.rand(v.shape, generator=gen) * 1e-6 for k, v in master.items()}
    # The padding rows of the vocabulary: the fork trains them like any row (they are in the
    # softmax), so they are not zero.
    return master, exp_avg, exp_avg_sq


def write_checkpoint(root, state, lay=FP16):
    """The folder DeepSpeed's engine saves under the fork at layout `lay`: fp16 with ZeRO-1
    (stage_1_and_2.py's state_dict) or bf16 with BF16_Optimizer (bf16_optimizer.py's)."""
    master, exp_avg, exp_avg_sq = state
    tag = f"global_step{ITERATION}"
    d = os.path.join(root, tag)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(root, "latest"), "w") as f:
        f.write(tag)
    args = make_args(lay)
    # The engine's counters: fp16 skipped one overflowed step (the loss scaler's
    # last_overflow_iter); bf16 never skips. The base optimizer (apex's FusedAdam, in
    # param_groups) counted one more step than the engine made: initialize_optimizer_states of
    # both optimizers steps once with zero gradients at start.
    skipped = 0 if lay.bf16 else 1
    adam_step = ITERATION - skipped + 1
    ds_version = "0.7.7" if lay.bf16 else "0.6.1"
    low = torch.bfloat16 if lay.bf16 else torch.float16
    torch.manual_seed(0)  # the saved RNG states: the same bytes on every run
    rng = torch.Generator().manual_seed(7)
    for pp in range(lay.pp):
        for tp in range(lay.tp):
            mp = pp * lay.tp + tp
            # Layer files (PipelineModule.save_state_dict, DP rank 0): fp16 / bf16 weights.
            layer_sd = collections.defaultdict(collections.OrderedDict)
            for pname, fname, _ in stage_params(pp, lay.pp):
                if pname.startswith("tied_modules"):
                    if pp != 0:
                        continue  # the last stage's tied copy is a partial(): not saved
                    idx, key = 1, pname[len("tied_modules.embed."):]
                else:
                    idx, key = int(pname.split(".")[0]), pname.split(".", 1)[1]
                layer_sd[idx][key] = tp_slice(fname, master[fname], tp, lay.tp).to(low)
            for idx, sd in layer_sd.items():
                torch.save(sd, os.path.join(d, f"layer_{idx:02d}-model_{tp:02d}-model_states.pt"))
            # ZeRO-1 (stage_1_and_2.py) and BF16_Optimizer alike: each group flattened, padded
            # to a multiple of 2 x DP (nccl_start_alignment_factor), split in DP equal
            # partitions; ZeRO-1's state_dict strips the last partition's padding from
            # single_partition_of_fp32_groups (only), BF16_Optimizer's keeps it.
            groups = param_groups(pp, lay.pp)
            flats = []
            for g in groups:
                parts = [(pn, tp_slice(fn, master[fn], tp, lay.tp),
                          tp_slice(fn, exp_avg[fn], tp, lay.tp),
                          tp_slice(fn, exp_avg_sq[fn], tp, lay.tp)) for pn, fn, _ in g]
                flats.append(parts)
            param_shapes = [collections.OrderedDict((pn, m.shape) for pn, m, _, _ in parts)
                            for parts in flats]
            for dp in range(lay.dp):
                fp32_groups, base_state, mappings, paddings = [], {}, [], []
                for gi, parts in enumerate(flats):
                    cat = [torch.cat([x[k].reshape(-1) for x in parts]) for k in (1, 2, 3)]
                    numel = cat[0].numel()
                    align = 2 * lay.dp
                    padded = (numel + align - 1) // align * align
                    cat = [torch.cat([c, torch.zeros(padded - numel)]) for c in cat]
                    size = padded // lay.dp
                    lo, hi = dp * size, (dp + 1) * size
                    pad = padded - numel if dp == lay.dp - 1 else 0
                    paddings.append(pad)
                    fp32_groups.append(cat[0][lo:hi if lay.bf16 else hi - pad].clone())
                    base_state[gi] = {"exp_avg": cat[1][lo:hi].clone(),
                                      "exp_avg_sq": cat[2][lo:hi].clone()}
                    m = collections.OrderedDict()
                    off = 0
                    for pn, t, _, _ in parts:
                        a, b = max(off, lo), min(off + t.numel(), hi)
                        if a < b:
                            m[pn] = fragment_address(numel=b - a, start=a - lo)
                        off += t.numel()
                    mappings.append(m)
                base = {"state": base_state,
                        "param_groups": [
                            {"lr": 5.9e-4, "bias_correction": True, "betas": (0.9, 0.95),
                             "eps": 1e-8, "weight_decay": 0.0 if gi == 2 else 0.1,
                             "amsgrad": False, "step": adam_step, "params": [gi]}
                            for gi in range(len(flats))]}
                if lay.bf16:
                    # bf16_optimizer.py BF16_Optimizer.state_dict (DeepSpeed 0.7).
                    optim = {"clip_grad": 1.0, "base_optimizer_state": base,
                             "single_partition_of_fp32_groups": fp32_groups,
                             "group_paddings": paddings, "partition_count": [lay.dp] * len(flats),
                             "ds_version": ds_version, "param_slice_mappings": mappings}
                    name = f"bf16_zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt"
                    ds_config = {"zero_optimization": {"stage": 0}, "bf16": {"enabled": True}}
                else:
                    scaler = DynamicLossScaler()
                    scaler.__dict__.update(cur_scale=2048.0, cur_iter=ITERATION,
                                           last_overflow_iter=1, scale_factor=2.0,
                                           scale_window=500, min_scale=1.0, delayed_shift=2,
                                           cur_hysteresis=1, consecutive_hysteresis=False,
                                           raise_error_at_min_scale=True, dynamic=True)
                    optim = {
                        "loss_scaler": scaler, "dynamic_loss_scale": True, "overflow": False,
                        "clip_grad": 1.0,
                        "base_optimizer_state": base,
                        "single_partition_of_fp32_groups": fp32_groups,
                        "zero_stage": ZeroStageEnum.optimizer_states,
                        "group_paddings": paddings, "partition_count": [lay.dp] * len(flats),
                        "ds_version": ds_version, "param_slice_mappings": mappings}
                    name = f"zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt"
                    ds_config = {"zero_optimization": {"stage": 1}}
                # engine._save_zero_checkpoint
                torch.save({"optimizer_state_dict": optim, "ds_config": ds_config,
                            "ds_version": ds_version}, os.path.join(d, name))
            # The engine's model-states file (engine._save_checkpoint + the fork's client state).
            precision = {"bf16": {"enabled": True}} if lay.bf16 else {"fp16": {"enabled": True}}
            state = {
                "module": None, "buffer_names": [], "optimizer": None,
                "param_shapes": param_shapes,
                "lr_scheduler": {"max_lr": 6e-4, "warmup_steps": 16,
                                 "num_steps": ITERATION * GLOBAL_BATCH, "warmup_tokens": 0,
                                 "num_tokens": ITERATION * GLOBAL_BATCH * SEQ,
                                 "decay_style": "cosine", "decay_steps": 640, "min_lr": 6e-5},
                "sparse_tensor_module_names": set(), "skipped_steps": skipped,
                "global_steps": ITERATION, "global_samples": ITERATION * GLOBAL_BATCH,
                "dp_world_size": lay.dp, "mp_world_size": lay.tp * lay.pp,
                "ds_config": {"train_batch_size": GLOBAL_BATCH, **precision,
                              "zero_optimization": {"stage": 0 if lay.bf16 else 1}},
                "ds_version": ds_version,
                "args": args, "checkpoint_version": 3.0, "iteration": ITERATION,
                "tokens": args.consumed_train_tokens,
                "checkpoint_info": {"padded_vocab_size": PADDED, "original_vocab_size": VOCAB},
                "torch_rng_state": torch.get_rng_state(),
                "cuda_rng_state": torch.get_rng_state(),  # no CUDA here: the CPU one's type
                "rng_tracker_states": {"model-parallel-rng": torch.get_rng_state()},
            }
            torch.save(state, os.path.join(d, f"mp_rank_{mp:02d}_model_states.pt"))


# tools/convert_checkpoint/ds_to_universal.py of the fork (merge_tp_slices).
WEIGHTS_TO_AVERAGE_PATTERNS = [
    r"tied_modules.embed.word_embeddings.norm.weight",
    r"tied_modules.embed.word_embeddings.norm.bias",
    r"\d+.input_layernorm.weight",
    r"\d+.input_layernorm.bias",
    r"\d+.post_attention_layernorm.weight",
    r"\d+.post_attention_layernorm.bias",
    r"\d+.self_attention.dense.bias",
    r"\d+.mlp.dense_4h_to_h.bias",
    r"\d+.weight",
    r"\d+.bias",
]
WEIGHTS_WITH_ROW_PARALLELISM_CONTAIN = ["dense_4h_to_h.weight", "self_attention.dense.weight"]


def write_universal(ckpt_root, tag):
    """The fork's tools/convert_checkpoint/ds_to_universal.py on ckpt_root/tag, written to
    ckpt_root/<tag>_universal (its --output_folder), step by step as that script does it from the
    saved files: every ZeRO file's fragments by param_slice_mappings (the last stages' tied
    embedding skipped), concatenated over DP in file order and reshaped to the TP piece's
    param_shapes shape, merged over TP (averaged for the replicated patterns, else concatenated,
    by columns for the row-parallel weights, with "cat_dim"), the embedding with its vocabulary
    padding and "vocab_divisibility_padding_tensor"; zero/<name>/{fp32,exp_avg,exp_avg_sq}.pt
    as {"cat_dim"?, "vocab_divisibility_padding_tensor"?, "param"}; the mp_rank files copied;
    ckpt_root/latest_universal naming the folder."""
    src = os.path.join(ckpt_root, tag)
    out = os.path.join(ckpt_root, tag + "_universal")
    files = sorted(os.listdir(src))
    mp_files = [f for f in files if f.startswith("mp_rank_")]
    tp_degree = len([f for f in files if f.startswith("layer_01-model_")])
    pp_degree = len(mp_files) // tp_degree
    dp_degree = len([f for f in files if f.startswith("zero_pp_rank_")]) // len(mp_files)
    slice_shapes = []
    for f in mp_files:
        slice_shapes += torch.load(os.path.join(src, f))["param_shapes"]
    slice_shapes = dict((k, v) for d in slice_shapes for k, v in d.items())
    info = torch.load(os.path.join(src, mp_files[0]))["checkpoint_info"]
    # 1. extract_zero_shards: fragments[name][tp][state] = [per dp]
    frags = collections.defaultdict(lambda: collections.defaultdict(
        lambda: collections.defaultdict(list)))
    for pp_index in range(pp_degree):
        for tp_index in range(tp_degree):
            for dp_index in range(dp_degree):
                mp = pp_index * tp_degree + tp_index
                sd = torch.load(os.path.join(
                    src, f"zero_pp_rank_{dp_index}_mp_rank_{mp:02d}_optim_states.pt"))
                optim_sd = sd["optimizer_state_dict"]
                state_groups = optim_sd["base_optimizer_state"]["state"]
                fp32_groups = optim_sd["single_partition_of_fp32_groups"]
                for gid in range(len(state_groups)):
                    flat_state = dict(exp_avg=state_groups[gid]["exp_avg"],
                                      exp_avg_sq=state_groups[gid]["exp_avg_sq"],
                                      fp32=fp32_groups[gid])
                    for name, fm in optim_sd["param_slice_mappings"][gid].items():
                        if "word_embeddings.weight" in name and pp_index > 0:
                            continue
                        for key, flat in flat_state.items():
                            frags[name][tp_index][key].append(
                                flat.narrow(0, fm.start, fm.numel).clone())
    # 2. merge_tp_slices
    for name, shape in slice_shapes.items():
        for state in ("fp32", "exp_avg", "exp_avg_sq"):
            slices = [torch.cat(frags[name][t][state], dim=0).reshape(shape)
                      for t in range(tp_degree)]
            ckpt_dict = {}
            if any(re.match(pattern, name) for pattern in WEIGHTS_TO_AVERAGE_PATTERNS):
                param = sum(slices) / len(slices)
            else:
                cat_dim = 1 if any(t in name for t in WEIGHTS_WITH_ROW_PARALLELISM_CONTAIN) else 0
                param = torch.cat(slices, dim=cat_dim)
                ckpt_dict["cat_dim"] = cat_dim
            if "word_embeddings.weight" in name:
                ckpt_dict["vocab_divisibility_padding_tensor"] = (
                    param[-1] if param.shape[0] > info["original_vocab_size"]
                    else torch.zeros(param.shape[1]))
            ckpt_dict["param"] = param
            path = os.path.join(out, "zero", name, f"{state}.pt")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save(ckpt_dict, path)
    for f in mp_files:
        shutil.copy2(os.path.join(src, f), out)
    with open(os.path.join(ckpt_root, "latest_universal"), "w") as f:
        f.write(tag + "_universal")


def to_anvil(name, t):
    """The fork's name and layout -> anvil's (docs/checkpoints.md): BLOOM's table of
    model/gpt/hf_bloom.cc, qkv rows [heads][3][hd] -> [3][heads][hd], padding rows dropped."""
    if name == "word_embeddings.weight":
        return "wte.weight", t[:VOCAB]
    fixed = {"word_embeddings.norm.weight": "wte_ln.weight",
             "word_embeddings.norm.bias": "wte_ln.bias",
             "final_layernorm.weight": "ln_f.weight", "final_layernorm.bias": "ln_f.bias"}
    if name in fixed:
        return fixed[name], t
    _, i, rest = name.split(".", 2)
    sub = {"input_layernorm": "ln_1", "self_attention.query_key_value": "attn.c_attn",
           "self_attention.dense": "attn.c_proj", "post_attention_layernorm": "ln_2",
           "mlp.dense_h_to_4h": "mlp.c_fc", "mlp.dense_4h_to_h": "mlp.c_proj"}
    mod, kind = rest.rsplit(".", 1)
    if mod == "self_attention.query_key_value":
        t = t.reshape(HEADS, 3, HD, -1).transpose(0, 1).reshape(t.shape)
    return f"h.{i}.{sub[mod]}.{kind}", t


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].contiguous().float().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def basic():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1
    ns = argparse.Namespace(num_layers=4, hidden_size=16, params_dtype=torch.float16,
                            position_embedding_type=PositionEmbeddingType.alibi,
                            data_path=["a", "b"], lr=6e-4, rampup_batch_size=None, fp16=True)
    return {
        "t": t,
        "row1": t[1],
        "half": t.half(),
        "bf16": t.bfloat16(),
        "long": torch.arange(4, dtype=torch.int64),
        "od": collections.OrderedDict([("w", t), ("n", 3)]),
        "args": ns,
        "size": torch.Size([2, 3]),
        "set": {7},
        "big": 2**40,
        "neg": -5,
        "f": 0.25,
        "none": None,
        "yes": True,
        "no": False,
        "nested": [1, (2, "x"), [3.5]],
    }


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        obj = torch.load(sys.argv[2])
        print(obj)
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.save(basic(), os.path.join(out, "basic.pt"))
    torch.save(basic(), os.path.join(out, "proto4.pt"), pickle_protocol=4)
    torch.save({"when": datetime.date(2022, 7, 1)}, os.path.join(out, "bad_global.pt"))
    torch.save({"c": torch.zeros(2, dtype=torch.complex64)}, os.path.join(out, "complex.pt"))
    gen = torch.Generator().manual_seed(1234)
    state = make_state(gen)
    write_checkpoint(os.path.join(out, "ckpt"), state, FP16)
    write_universal(os.path.join(out, "ckpt"), f"global_step{ITERATION}")
    write_checkpoint(os.path.join(out, "ckpt_bf16"), state, BF16)
    master, exp_avg, exp_avg_sq = state
    expected = {}
    for prefix, st in [("master/", master), ("exp_avg/", exp_avg), ("exp_avg_sq/", exp_avg_sq)]:
        for k, v in st.items():
            n, t = to_anvil(k, v)
            expected[prefix + n] = t
    write_safetensors(os.path.join(out, "expected.safetensors"), expected)


if __name__ == "__main__":
    main()
