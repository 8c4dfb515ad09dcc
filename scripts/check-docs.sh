#!/usr/bin/env bash
# Checks the docs (docs/*.md, docs/architecture/*.md, README.md) against the public headers
# (include/ember/*.h and the header generated from the op table,
# $EMBER_BUILD/gen/include/ember/ops_gen.h, build by default):
#  - every call `em_x(...)` names a function the headers declare;
#  - calls in fenced code blocks, and every call in docs/ops.md (which gives full signatures),
#    pass as many arguments as the declaration takes (variadic functions, `em_x()` as a bare
#    name and arguments written as `...` or `..` are not counted);
#  - a bare name in code that only begins public names (`em_no_grad` where the API is
#    em_no_grad_begin / em_no_grad_end) is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'EOF'
import glob
import re
import sys


def strip_c_comments(s):
    s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
    return re.sub(r"//[^\n]*", " ", s)


def split_args(s):
    """Top-level comma-separated arguments of a call's text."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    out = [a.strip() for a in out]
    return [] if out == [""] else out


import os

gen = os.path.join(os.environ.get("EMBER_BUILD", "build"), "gen/include/ember/ops_gen.h")
if not os.path.exists(gen):
    sys.exit(f"check-docs: {gen} not found (build first, or set EMBER_BUILD)")
headers = ""
for f in sorted(glob.glob("include/ember/*.h")) + [gen]:
    headers += open(f, encoding="utf-8").read() + "\n"
headers = strip_c_comments(headers)
decls = {}  # name -> number of parameters, None when variadic (or a function-like macro)
for m in re.finditer(r"^\s*#\s*define\s+(em_\w+)\(", headers, flags=re.M):
    decls[m.group(1)] = None
headers = re.sub(r"^\s*#.*$", "", headers, flags=re.M)
for m in re.finditer(
    r"\b(em_\w+)\s*\(((?:[^();{}]|\([^()]*\))*)\)\s*(?:EM_PRINTF\([^)]*\))?\s*;", headers
):
    params = split_args(m.group(2))
    if params == ["void"]:
        params = []
    decls[m.group(1)] = None if "..." in params else len(params)
names = set(re.findall(r"\bem_\w+", headers)) | set(decls)
if len(decls) < 100:
    sys.exit(f"check-docs: only {len(decls)} declarations found in include/ember/*.h")

errors = []
files = sorted(glob.glob("docs/*.md")) + sorted(glob.glob("docs/architecture/*.md")) + ["README.md"]
for path in files:
    text = open(path, encoding="utf-8").read()
    # code regions: (start offset, text, counted) with comments removed from fenced C blocks
    regions = []
    fenced = list(re.finditer(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M))
    for m in fenced:
        regions.append((m.start(1), strip_c_comments(m.group(1)), True))
    masked = text
    for m in fenced:
        masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end():]
    for m in re.finditer(r"`([^`\n]+)`", masked):
        regions.append((m.start(1), m.group(1), path == "docs/ops.md"))
    for start, code, counted in regions:
        line = text.count("\n", 0, start) + 1
        for m in re.finditer(r"\b(em_\w+)\s*\(", code):
            name = m.group(1)
            if name not in decls:
                errors.append(f"{path}:{line}: {name}() is not declared in include/ember/")
                continue
            depth, j = 1, m.end()
            while j < len(code) and depth:
                depth += {"(": 1, ")": -1}.get(code[j], 0)
                j += 1
            if depth or not counted or decls[name] is None:
                continue
            args = split_args(code[m.end() : j - 1])
            if not args or any(a in ("...", "..", "…") or "..." in a or "…" in a for a in args):
                continue
            if len(args) != decls[name]:
                errors.append(
                    f"{path}:{line}: {name}({', '.join(args)}) has {len(args)} arguments; "
                    f"the declaration has {decls[name]}"
                )
        for m in re.finditer(r"\b(em_\w+)\b(?![({*/_])", code):
            name = m.group(1)
            if name not in names and any(n.startswith(name + "_") for n in decls):
                errors.append(f"{path}:{line}: {name} is not in the API (did you mean one of "
                              f"{', '.join(sorted(n for n in decls if n.startswith(name + '_'))[:3])}?)")

for e in errors:
    print(e, file=sys.stderr)
if errors:
    sys.exit(f"check-docs: {len(errors)} problem(s)")
print(f"check-docs: {len(files)} files against {len(decls)} declarations: ok")
EOF
