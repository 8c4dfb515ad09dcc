#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets that read configuration, JSON, images, IDX, CSV,
text and the mnist JSON digits: fuzz/corpus/fuzz_{config,json,image,idx,csv,text,mnist_json}/. Small valid inputs of each kind (so the
fuzzer starts inside the formats) plus a few broken ones. The .pt and safetensors seeds come
from scripts/fixtures_store.py and scripts/hostile_files.py.
Run: /usr/bin/python3 scripts/fuzz_seeds.py (needs Pillow for the JPEG seeds)"""
import gzip
import io
import json
import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def png(width, height, colour_type, bit_depth=8, rows=None, palette=None):
    """A PNG written by hand: IHDR, optional PLTE, one IDAT (filter 0), IEND."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour_type]
    row_bytes = (width * channels * bit_depth + 7) // 8
    if rows is None:
        rows = [bytes((x * 37 + y * 11) & 0xFF for x in range(row_bytes)) for y in range(height)]
    raw = b"".join(b"\0" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n"
    out += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0))
    if palette:
        out += chunk(b"PLTE", palette)
    out += chunk(b"IDAT", zlib.compress(raw))
    return out + chunk(b"IEND", b"")


def idx(type_code, dims, fmt):
    n = 1
    for d in dims:
        n *= d
    head = bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + struct.pack(">%d%s" % (n, fmt), *[(i * 7) % 100 for i in range(n)])


def main():
    # ember.toml
    write("fuzz_config", "example.toml",
          b'# settings\ndevice = "cpu"\nthreads = 8\nseed = 1234\ndetect_anomaly = false\n'
          b'cache_dir = "/var/cache/ember"\nlog_file = "ember.log"\n\n[log]\n"*" = "warn"\n'
          b'cpu = "debug"\nconfig = "info"\n')
    write("fuzz_config", "values.toml",
          b"a = 1_000\nb = 0xff\nc = 0o17\nd = 0b101\ne = -0.5e+2\nf = inf\ng = nan\n"
          b"h = 'literal \\ string'\ni = \"esc \\\" \\\\ \\n \\t \\u00e9 \\U0001F600\"\n"
          b"[x.y]\n\"quoted key\".z = true\nstore_expand_ratio = 32\r\n")
    write("fuzz_config", "bad.toml", b"[[arr]]\nk = [1, 2]\nt = {a = 1}\nk = 2\nk = 3\n")
    write("fuzz_config", "bom.toml", b"\xef\xbb\xbfkey = \"v\" # comment\n")
    # JSON
    write("fuzz_json", "header.json",
          json.dumps({"__metadata__": {"format": "pt"},
                      "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode())
    write("fuzz_json", "values.json",
          b'{"a": [1, -2.5e10, 0, true, false, null], "b": "\\u00e9\\ud83d\\ude00\\n",'
          b' "c": {"d": {"e": []}}, "f": 18446744073709551615}        ')
    write("fuzz_json", "log.json", b'{"epoch": 3, "step": 120, "loss": 0.25, "lr": 1e-3}')
    write("fuzz_json", "dup.json", b'{"a": 1, "a": 2}')
    write("fuzz_json", "deep.json", b"[" * 70 + b"]" * 70)
    # images: PNG of every colour type, JPEG grey and RGB
    write("fuzz_image", "grey.png", png(5, 3, 0))
    write("fuzz_image", "rgb.png", png(4, 4, 2))
    write("fuzz_image", "rgba.png", png(3, 2, 6))
    write("fuzz_image", "grey_alpha.png", png(2, 2, 4))
    write("fuzz_image", "palette.png", png(4, 2, 3, palette=bytes(range(12))))
    write("fuzz_image", "grey16.png", png(3, 3, 0, bit_depth=16))
    write("fuzz_image", "grey1.png", png(9, 2, 0, bit_depth=1))
    write("fuzz_image", "truncated.png", png(8, 8, 2)[:60])
    try:
        from PIL import Image
        for mode, name in (("L", "grey.jpg"), ("RGB", "rgb.jpg")):
            im = Image.new(mode, (9, 7))
            im.putdata([((x * 29 + y * 13) % 256) if mode == "L" else
                        ((x * 29) % 256, (y * 31) % 256, (x * y) % 256)
                        for y in range(7) for x in range(9)])
            buf = io.BytesIO()
            im.save(buf, "JPEG", quality=80)
            write("fuzz_image", name, buf.getvalue())
        im = Image.new("RGB", (16, 16), (10, 200, 30))
        buf = io.BytesIO()
        im.save(buf, "JPEG", progressive=True)
        write("fuzz_image", "progressive.jpg", buf.getvalue())
    except ImportError:
        pass
    # IDX: every type code, plain and gzip
    write("fuzz_idx", "u8.idx", idx(0x08, [3, 2, 2], "B"))
    write("fuzz_idx", "i8.idx", idx(0x09, [4], "b"))
    write("fuzz_idx", "i16.idx", idx(0x0B, [2, 3], "h"))
    write("fuzz_idx", "i32.idx", idx(0x0C, [5], "i"))
    write("fuzz_idx", "f32.idx", idx(0x0D, [2, 2], "f"))
    write("fuzz_idx", "f64.idx", idx(0x0E, [3], "d"))
    write("fuzz_idx", "labels.idx.gz", gzip.compress(idx(0x08, [10], "B")))
    write("fuzz_idx", "zero_dim.idx", idx(0x08, [0, 5], "B"))
    # CSV: the first byte picks the reader's options (fuzz_csv.c)
    write("fuzz_csv", "header.csv", b"\x10a,b,label\n1,2,0\n3.5,-4,1\n")
    write("fuzz_csv", "plain.csv", b"\x00" + b"1,2,3\n4,5,6\r\n\n7,8,9")
    write("fuzz_csv", "spaces.csv", b"\x02" + b"  1 2\t3\n4  5 6\n")
    write("fuzz_csv", "label_float.csv", b"\x50" + b"x;y\n0.5;1e3\n")
    write("fuzz_csv", "gzip.csv", b"\x00" + gzip.compress(b"1,2\n3,4\n"))
    write("fuzz_csv", "ragged.csv", b"\x00" + b"1,2\n3\n")
    # text corpora: ASCII lines, UTF-8 of every length, bytes read as Latin-1
    write("fuzz_text", "lines.txt", b"to be or not to be\nthat is the question\n\n")
    write("fuzz_text", "utf8.txt", "caf\u00e9 \u20ac \U0001F600\r\nz".encode())
    write("fuzz_text", "latin1.txt", b"\xe9t\xe9 \xff\xfe\xc3(\xf0\x9f\x98")
    # mnist JSON digits: one and two images per class, a bad value
    img = ",".join(str((i * 7) % 256) for i in range(784)).encode()
    write("fuzz_mnist_json", "one.json", b'{"data": [' + img + b"]}")
    write("fuzz_mnist_json", "two.json", b'{"labels": 1, "data":[' + img + b"," + img + b"]}")
    write("fuzz_mnist_json", "bad.json", b'{"data": [1, 2, x]}')


if __name__ == "__main__":
    main()
