#!/usr/bin/python3
"""Writes hostile model files for the store layer's readers: pickles that multiply work through
the memo, expanded and overlapping tensor views, shapes whose element count overflows, duplicate
names, deep nesting, huge declared lengths and memo indices, zip64 size lies, and safetensors
headers with the same tricks. Every file is small; each must be refused with a clear error (or,
for views kept as views, load without materialising) within seconds and little memory.

The pickles and zip archives are written byte by byte here (no torch), so the files are exactly
what an attacker could hand over. Outputs:
  tests/fixtures/store/hostile/   the files test_hostile.c runs (and expect.txt, the error each
                                  must give)
  fuzz/corpus/fuzz_pt/, fuzz/corpus/fuzz_safetensors/   the same files as fuzzing seeds
Run: /usr/bin/python3 scripts/hostile_files.py [--big DIR]
With --big DIR, also writes larger files (100k tensors, many storages, memory bombs of a few MB)
to DIR for timing and offline checks; they are not committed."""
import hashlib
import json
import os
import struct
import sys
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "store", "hostile")
SEEDS = os.path.join(ROOT, "fuzz", "corpus")

# ---- pickle opcodes ------------------------------------------------------------------------


def proto():
    return b"\x80\x02"


def binunicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def short_str(s):
    b = s.encode()
    return b"U" + bytes([len(b)]) + b


def put(i):
    return b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)


def get(i):
    return b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)


def pint(v):
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(2**31) <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def tup(items):
    return b"(" + b"".join(items) + b"t"


def storage(key, numel, cls="FloatStorage"):
    """BINPERSID of ("storage", torch.<cls>, key, "cpu", numel)."""
    return (tup([short_str("storage"), b"ctorch\n" + cls.encode() + b"\n", short_str(key),
                 short_str("cpu"), pint(numel)]) + b"Q")


def tensor(key, numel, size, stride, offset=0, cls="FloatStorage"):
    """_rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
    return (b"ctorch._utils\n_rebuild_tensor_v2\n" +
            tup([storage(key, numel, cls), pint(offset), tup([pint(d) for d in size]),
                 tup([pint(s) for s in stride]), b"\x89",
                 b"ccollections\nOrderedDict\n)R"]) + b"R")


def dict_of(pairs):
    """{k: v, ...} with SETITEMS."""
    return b"}(" + b"".join(short_str(k) + v for k, v in pairs) + b"u"


# ---- zip archives --------------------------------------------------------------------------


def zip_archive(entries, zip64_lie=None):
    """A zip of (name, data, deflate) entries, stored unless deflate. zip64_lie = (name, size):
    that entry's local and central headers declare `size` bytes (compressed and not) through a
    zip64 extra field while holding its real bytes. More than 65535 entries get a zip64 end
    record."""
    out, central, at = [], [], 0
    for name, data, deflate in entries:
        nb = name.encode()
        crc = zlib.crc32(data)
        body = zlib.compress(data)[2:-4] if deflate else data
        method = 8 if deflate else 0
        csize, usize, extra = len(body), len(data), b""
        if zip64_lie and zip64_lie[0] == name:
            extra = struct.pack("<HHQQ", 1, 16, zip64_lie[1], zip64_lie[1])
            csize = usize = 0xFFFFFFFF
        version = 45 if extra else 20
        local = struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, method, 0, 0, crc, csize,
                            usize, len(nb), len(extra)) + nb + extra
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, version, 0, method, 0,
                                   0, crc, csize, usize, len(nb), len(extra), 0, 0, 0, 0, at) +
                       nb + extra)
        out += [local, body]
        at += len(local) + len(body)
    cd = b"".join(central)
    n = len(entries)
    tail = b""
    if n > 65535:
        tail = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(cd), at)
        tail += struct.pack("<IIQI", 0x07064B50, 0, at + len(cd), 1)
        tail += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, len(cd), at, 0)
    else:
        tail = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(cd), at, 0)
    return b"".join(out) + cd + tail


def pt_file(pickle, storages=(), folder="archive", zip64_lie=None, deflate_pickle=False):
    """A torch.save-style archive: data.pkl, byteorder, and data/<key> storages."""
    entries = [(folder + "/data.pkl", pickle, deflate_pickle),
               (folder + "/byteorder", b"little", False)]
    entries += [(folder + "/data/" + k, v, False) for k, v in storages]
    return zip_archive(entries, zip64_lie)


def f32(n):
    return struct.pack("<%df" % n, *[float(i) for i in range(n)])


# ---- safetensors ---------------------------------------------------------------------------


def st_file(header, data=b"", raw=None):
    h = raw if raw is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ---- the families --------------------------------------------------------------------------


def memo_bomb(levels, leaf, as_dict=False):
    """levels of [m, m] (or {"a": m, "b": m}) built from the memo: 2^levels paths."""
    p = proto() + leaf + put(0)
    for i in range(1, levels + 1):
        if as_dict:
            p += b"}(" + short_str("a") + get(i - 1) + short_str("b") + get(i - 1) + b"u"
        else:
            p += b"(" + get(i - 1) + get(i - 1) + b"l"
        p += put(i)
    return p + b"}" + short_str("k") + get(levels) + b"s."


def small_files():
    """name -> (bytes, expectation) or (bytes, load expectation, inspect expectation). An
    expectation is the text the error must contain, or "ok" for a file that must load (or be
    listed)."""
    f = {}
    one = [("0", f32(1))]
    # Shared references followed without limit.
    f["memo_bomb.pt"] = (pt_file(memo_bomb(62, b"]")), "work budget")
    f["memo_bomb_tensor.pt"] = (pt_file(memo_bomb(62, b"](" + tensor("0", 1, [1], [1]) + b"l"),
                                        one), "output budget")
    f["memo_bomb_dict.pt"] = (pt_file(memo_bomb(62, b"}", as_dict=True)), "work budget")
    # One tensor under many names is one tensor, not many copies.
    refs = proto() + tensor("0", 1, [1], [1]) + put(0) + b"}("
    refs += b"".join(short_str("t%d" % i) + get(0) for i in range(200)) + b"u."
    f["shared_tensor.pt"] = (pt_file(refs, one), "ok")
    # Expanded (stride 0) and overlapping views of a tiny storage.
    f["expand_8g.pt"] = (pt_file(proto() + dict_of([("w", tensor("0", 1, [2**31], [0]))]) + b".",
                                 one), "ok")
    f["expand_2d.pt"] = (pt_file(proto() + dict_of([("w", tensor("0", 4, [2**20, 2**12, 4],
                                                               [0, 0, 1]))]) + b".",
                                 [("0", f32(4))]), "ok")
    f["expand_small.pt"] = (pt_file(proto() + dict_of([("w", tensor("0", 4, [1000, 4], [0, 1]))])
                                    + b".", [("0", f32(4))]), "ok")
    f["overlap_16g.pt"] = (pt_file(proto() + dict_of([("w", tensor("0", 8192, [2**11, 2**11, 2**10],
                                                                 [1, 1, 1]))]) + b".",
                                   [("0", f32(8192))]), "materialising", "ok")
    # Element counts that overflow int64, with and without a zero dim.
    for name, size in (("overflow_zero_dim", [2**32, 2**32 - 1, 0]),
                       ("overflow", [2**32, 2**32]),
                       ("overflow_bytes", [2**61])):
        p = proto() + dict_of([("w", tensor("0", 1, size, [0] * len(size)))]) + b"."
        f[name + ".pt"] = (pt_file(p, one), "overflows")
    # The same name twice, through nesting.
    dup = proto() + dict_of([("a.b", tensor("0", 1, [1], [1])),
                             ("a", dict_of([("b", tensor("0", 1, [1], [1]))]))]) + b"."
    f["duplicate_names.pt"] = (pt_file(dup, one), "duplicate tensor name")
    dup_int = proto() + b"}(" + pint(1) + tensor("0", 1, [1], [1]) + short_str("1") + \
        tensor("0", 1, [1], [1]) + b"u."
    f["duplicate_int_key.pt"] = (pt_file(dup_int, one), "duplicate tensor name")
    # Deep nesting of containers (the unpickler is not recursive; the walk is capped).
    deep = proto() + b"}" + short_str("k") + b"]" * 5000 + b"a" * 4999 + b"s."
    f["deep_lists.pt"] = (pt_file(deep), "deeper than 64")
    # A deflated data.pkl of a million lists (2 MB inflated, 60 times its compressed size;
    # bytes after STOP are never read, here they only make it compress less).
    noise = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(1000))
    lists = proto() + b"}" + short_str("k") + b"]" + b"]a" * 1_000_000 + b"s." + noise
    f["compressed_pickle.pt"] = (pt_file(lists, deflate_pickle=True), "memory")
    # Huge declared lengths and indices.
    f["huge_string.pt"] = (pt_file(proto() + b"X\xff\xff\xff\x7f" + b"abc"), "longer than")
    f["string_past_end.pt"] = (pt_file(proto() + b"X\x00\x00\x10\x00" + b"abc"), "truncated")
    f["memo_put_huge.pt"] = (pt_file(proto() + b"Nr\xff\xff\xff\xff."), "exceeds the limit")
    f["memo_get_unset.pt"] = (pt_file(proto() + b"N" + put(2**20 - 1) + b"j\xfe\xff\x0f\x00."),
                              "is not set")
    f["long1_wide.pt"] = (pt_file(proto() + b"\x8a\xff" + b"\x01" * 255 + b"."), "wider than")
    f["storage_numel_huge.pt"] = (pt_file(proto() + dict_of([("w", tensor("0", 2**62, [1], [1]))])
                                          + b".", one), "overflows")
    # A stored entry whose zip64 sizes claim 1 TiB inside a tiny file.
    f["zip64_lie.pt"] = (pt_file(proto() + dict_of([("w", tensor("0", 1, [1], [1]))]) + b".",
                                 one, zip64_lie=("archive/data/0", 2**40)), "zip")
    # Damaged containers: a truncated archive, a legacy pickle, a safetensors file named .pt.
    good = pt_file(proto() + dict_of([("w", tensor("0", 4, [4], [1]))]) + b".", [("0", f32(4))])
    f["good.pt"] = (good, "ok")
    f["truncated.pt"] = (good[: len(good) * 2 // 3], "truncated or damaged zip archive")
    f["legacy.pt"] = (proto() + b"}.", "legacy")
    f["safetensors_named.pt"] = (st_file({"w": {"dtype": "F32", "shape": [1],
                                                "data_offsets": [0, 4]}}, f32(1)),
                                 "safetensors")
    # safetensors: the same families.
    for name, shape in (("overflow_zero_dim", [2**32, 2**32 - 1, 0]),
                        ("overflow_bytes", [2**62, 0])):
        f[name + ".safetensors"] = (st_file({"w": {"dtype": "F32", "shape": shape,
                                                   "data_offsets": [0, 0]}}), "overflows")
    f["deep_json.safetensors"] = (st_file(None, raw=b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"),
                                  "deeper than 64")
    f["dup_json.safetensors"] = (st_file(None, raw=b'{"w":{"dtype":"F32","shape":[],"data_'
                                         b'offsets":[0,4]},"w":{"dtype":"F32","shape":[],'
                                         b'"data_offsets":[4,8]}}', data=f32(2)), "duplicate")
    f["header_past_end.safetensors"] = (struct.pack("<Q", 99_999_999) + b"{}", "past the end")
    f["header_over_limit.safetensors"] = (struct.pack("<Q", 2**40) + b"{}", "exceeds the limit")
    f["zip_named.safetensors"] = (good, "not a safetensors file")
    # Terminal escapes in names and metadata (ember inspect must print them escaped).
    f["control_chars.safetensors"] = (st_file({"__metadata__": {"k\x07": "v\x1b[31mred"},
                                               "\x1b[2Jevil": {"dtype": "F32", "shape": [],
                                                               "data_offsets": [0, 4]}},
                                              f32(1)), "ok")
    return f


def big_files():
    """Larger inputs for timings and the offline check (not committed)."""
    f = {}
    for n in (10_000, 50_000, 100_000):
        h = {"t%d" % i: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
             for i in range(n)}
        f["many_%d.safetensors" % n] = st_file(h, b"\0" * (4 * n))
        p = proto() + b"}("
        p += b"".join(short_str("t%d" % i) + tensor(str(i), 1, [1], [1]) for i in range(n))
        f["many_%d.pt" % n] = pt_file(p + b"u.", [(str(i), f32(1)) for i in range(n)])
    # 2 million small lists in a 4 MB pickle: interpreter memory.
    f["list_bomb.pt"] = pt_file(proto() + b"}" + short_str("k") + b"]" + b"]a" * 2_000_000 +
                                b"s.")
    # One tensor under a million names: output size.
    p = proto() + b"}" + short_str("k") + b"](" + tensor("0", 1, [1], [1]) + put(0)
    f["names_bomb.pt"] = pt_file(p + get(0) * 1_000_000 + b"es.", [("0", f32(1))])
    # 20k views of the whole of one 64 KiB storage: 1.3 GB of copies from a 1 MB file.
    p = proto() + b"}("
    p += b"".join(short_str("v%d" % i) + tensor("0", 16384, [16384], [1]) for i in range(20000))
    f["views_bomb.pt"] = pt_file(p + b"u.", [("0", f32(16384))])
    # A JSON header of 8 MB that is one long array.
    f["json_array.safetensors"] = st_file(None, raw=b'{"w":{"dtype":"F32","shape":[],'
                                          b'"data_offsets":[0,4],"x":[' + b"0," * 4_000_000 +
                                          b"0]}}", data=f32(1))
    return f


def main():
    os.makedirs(OUT, exist_ok=True)
    files = small_files()
    with open(os.path.join(OUT, "expect.txt"), "w") as ex:
        ex.write("# file|loading gives|inspecting gives: text the error must contain, or ok\n")
        for name in sorted(files):
            data, load = files[name][:2]
            inspect = files[name][2] if len(files[name]) > 2 else load
            with open(os.path.join(OUT, name), "wb") as fh:
                fh.write(data)
            ex.write("%s|%s|%s\n" % (name, load, inspect))
            target = "fuzz_safetensors" if name.endswith(".safetensors") else "fuzz_pt"
            os.makedirs(os.path.join(SEEDS, target), exist_ok=True)
            with open(os.path.join(SEEDS, target, "hostile_" + name), "wb") as fh:
                fh.write(data)
    if len(sys.argv) == 3 and sys.argv[1] == "--big":
        os.makedirs(sys.argv[2], exist_ok=True)
        for name, data in big_files().items():
            with open(os.path.join(sys.argv[2], name), "wb") as fh:
                fh.write(data)


if __name__ == "__main__":
    main()
