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
Not done yet: the fork-layout checkpoint (layer_XX-model_YY-model_states.pt, mp_rank_XX,
zero_pp_rank_X_mp_rank_YY_optim_states.pt) of the BLOOM-style tiny model (issue 24).
"""
import argparse
import collections
import datetime
import enum
import os
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


if __name__ == "__main__":
    main()
