#!/usr/bin/python3
"""Writes the store-layer fixtures under tests/fixtures/store/ with tools independent of Ember:
a safetensors file built with plain struct + json (the layout the reference writer produces),
and .pt files written by torch.save (state dicts of many dtypes, a nested checkpoint, views
sharing storage, a malicious pickle), each with its expected tensors as safetensors.
Run: /usr/bin/python3 scripts/fixtures_store.py"""
import collections
import json
import os
import struct

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "store")
ST_NAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
            torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
            torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def raw_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    """The safetensors layout, by hand: sorted by descending alignment then name, compact JSON,
    header padded with spaces to a multiple of 8."""
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for k in order:
        b = raw_bytes(tensors[k])
        header[k] = {"dtype": ST_NAMES[tensors[k].dtype], "shape": list(tensors[k].shape),
                     "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ember_pwned",))


def main():
    os.makedirs(OUT, exist_ok=True)
    ref = {"a": torch.arange(12, dtype=torch.float32).reshape(3, 4),
           "b": torch.arange(5, dtype=torch.int64) - 2,
           "c": torch.tensor([1, 0.5, -2], dtype=torch.float16),
           "e": torch.tensor([True, False])}
    write_safetensors(os.path.join(OUT, "ref.safetensors"), ref, {"writer": "fixtures_store.py"})

    g = torch.Generator().manual_seed(7)
    sd = collections.OrderedDict()
    for dt in ST_NAMES:
        x = torch.randn(2, 3, generator=g) * 50
        sd["w_" + ST_NAMES[dt].lower()] = x.to(dt) if dt != torch.bool else x > 0
    sd["scalar"] = torch.tensor(3.5)
    sd["empty"] = torch.zeros(0, 4)
    sd["param"] = torch.nn.Parameter(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    torch.save(sd, os.path.join(OUT, "types.pt"))
    write_safetensors(os.path.join(OUT, "types.expect.safetensors"), sd)

    small = collections.OrderedDict(
        [("layer.weight", torch.arange(6, dtype=torch.float32).reshape(3, 2)),
         ("layer.bias", torch.tensor([0.25, -0.5, 1.0]))])
    torch.save({"epoch": 5, "name": "run", "lr": 0.1, "state_dict": small,
                "optimizer": {"state": {}, "param_groups": [{"lr": 0.1, "params": [0, 1]}]}},
               os.path.join(OUT, "nested.pt"))
    write_safetensors(os.path.join(OUT, "nested.expect.safetensors"), small)

    base = torch.arange(20, dtype=torch.float64).reshape(4, 5)
    views = collections.OrderedDict([("base", base), ("transposed", base.t()),
                                     ("row", base[2]), ("column", base[:, 3]),
                                     ("strided", base[::2, 1::2])])
    torch.save(views, os.path.join(OUT, "views.pt"))
    write_safetensors(os.path.join(OUT, "views.expect.safetensors"),
                      {k: v.contiguous() for k, v in views.items()})

    torch.save({"weight": torch.ones(2), "evil": Evil()}, os.path.join(OUT, "malicious.pt"))


if __name__ == "__main__":
    main()
