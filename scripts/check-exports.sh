#!/usr/bin/env bash
# Usage: scripts/check-exports.sh LIBDIR
# The libraries in LIBDIR (a build folder or an installed lib/) export only the public API:
#  - each shared library's dynamic symbols (nm -D) are exactly the functions its public headers
#    declare with EM_API: libember-pt.so ember/pt.h, libember-data.so ember/data.h,
#    libember-train.so ember/train.h, libember.so the other headers;
#  - a function a header names that the static library defines is exported (no EM_API missing);
#  - the core's shared library loads nothing but libc, libm, libpthread and libdl (ldd).
set -euo pipefail
cd "$(dirname "$0")/.."
libdir=${1:?usage: scripts/check-exports.sh LIBDIR}
fail() {
  echo "check-exports: $*" >&2
  exit 1
}
# declared HEADER...: the functions declared with EM_API
declared() {
  perl -0777 -ne 's{/\*.*?\*/}{}gs; s{^[ \t]*#.*$}{}mg; while (/\bEM_API\b[^;{]*?\b([A-Za-z_]\w*)\s*\(/g) { print "$1\n" }' "$@" |
    sort -u
}
# named HEADER...: every em_ name followed by '(' anywhere in the headers, comments included
named() {
  grep -oh '\bem_[a-z0-9_]*[[:space:]]*(' "$@" | tr -d '( \t' | sort -u
}
core_headers=()
for h in include/ember/*.h; do
  case ${h##*/} in pt.h | data.h | train.h | ember.h) ;; *) core_headers+=("$h") ;; esac
done
# the header generated from the op table (build/gen/include, or installed beside the others)
gen_header=
for g in "$libdir/gen/include/ember/ops_gen.h" "$libdir/../include/ember/ops_gen.h"; do
  [ -e "$g" ] && gen_header=$g && break
done
[ -n "$gen_header" ] || fail "ember/ops_gen.h (generated from the op table) not found beside $libdir"
core_headers+=("$gen_header")
check() { # LIB HEADER...
  local lib=$1
  shift
  [ -e "$libdir/$lib.so" ] || fail "$libdir/$lib.so not found"
  [ -e "$libdir/$lib.a" ] || fail "$libdir/$lib.a not found"
  declared "$@" >"$work/declared"
  nm -D --defined-only "$libdir/$lib.so" | awk '{print $3}' | sort -u >"$work/exported"
  if ! diff "$work/declared" "$work/exported" >"$work/diff"; then
    echo "$lib.so: '<' declared with EM_API but not exported, '>' exported but not declared:" >&2
    cat "$work/diff" >&2
    fail "$lib.so does not export exactly its public API"
  fi
  nm -g --defined-only "$libdir/$lib.a" 2>/dev/null | awk '$2 == "T" {print $3}' | sort -u >"$work/defined"
  named "$@" | comm -12 - "$work/defined" | comm -23 - "$work/exported" >"$work/missing"
  [ ! -s "$work/missing" ] || fail "$lib: public functions without EM_API: $(tr '\n' ' ' <"$work/missing")"
  echo "$lib.so: $(wc -l <"$work/exported") functions, all declared in its headers"
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check libember "${core_headers[@]}"
check libember-pt include/ember/pt.h
check libember-data include/ember/data.h
check libember-train include/ember/train.h
# the core's dependencies: the C library's parts only
deps=$(ldd "$libdir/libember.so" | awk '{print $1}' |
  grep -Ev '^(linux-vdso\.so\.1|/lib.*/ld-linux.*\.so\.[0-9]+|lib(c|m|pthread|dl)\.so\.[0-9]+)$' || true)
[ -z "$deps" ] || fail "libember.so loads more than libc, libm, libpthread and libdl: $deps"
echo "libember.so loads: $(ldd "$libdir/libember.so" | awk '{print $1}' | tr '\n' ' ')"
