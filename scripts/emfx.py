"""Writes golden fixture files for the C tests (read by tests/harness.c).

Format (little-endian): b"EMFX", u32 count, then per tensor: u32 name length, name bytes,
u8 kind (0 = f64, 1 = i64), u8 rank, i64 dims[rank], numel values of 8 bytes each.
Run fixture scripts with Debian's Python: /usr/bin/python3 scripts/fixtures_<family>.py
"""
import os
import struct

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")


def write(name, tensors):
    """tensors: dict name -> torch tensor / numpy array / python scalar."""
    import numpy as np
    out = [b"EMFX", struct.pack("<I", len(tensors))]
    for key, value in tensors.items():
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
        is_int = arr.dtype.kind in "iub"
        arr = arr.astype(np.int64 if is_int else np.float64)
        kb = key.encode()
        out.append(struct.pack("<I", len(kb)))
        out.append(kb)
        out.append(struct.pack("<BB", 1 if is_int else 0, arr.ndim))
        out.append(struct.pack("<%dq" % arr.ndim, *arr.shape))
        out.append(np.ascontiguousarray(arr).astype("<i8" if is_int else "<f8").tobytes())
    os.makedirs(FIXTURE_DIR, exist_ok=True)
    with open(os.path.join(FIXTURE_DIR, name), "wb") as f:
        f.write(b"".join(out))
