#!/usr/bin/env bash
# The `ember` command line: help and version on stdout with status 0, usage errors on stderr
# with status 2 (unknown command, unknown option, missing or extra arguments), failures with
# status 1 and the library's message, inspect and convert on the store fixtures and hostile
# files. Usage: cli.sh EMBER_BINARY FIXTURES_DIR
set -u
ember=$1
fixtures=$2
tmp=$(mktemp -d /tmp/ember_cli_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# check WHAT WANT_STATUS STREAM PATTERN -- ARGS...: runs ember ARGS; the status must be
# WANT_STATUS and STREAM (out or err) must match the extended regex PATTERN ("" skips it).
check() {
  local what=$1 want=$2 stream=$3 pattern=$4
  shift 5
  timeout 20 "$ember" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local got=$?
  local ok=1
  [ "$got" = "$want" ] || ok=0
  if [ -n "$pattern" ] && ! grep -Eq -- "$pattern" "$tmp/$stream"; then ok=0; fi
  if [ $ok = 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $what: ember $* -> status $got (want $want), $stream should match /$pattern/"
    echo "  stdout: $(head -c 400 "$tmp/out")"
    echo "  stderr: $(head -c 400 "$tmp/err")"
  fi
}

# stream must be empty
empty() {
  if [ -s "$tmp/$1" ]; then
    failed=$((failed + 1))
    echo "FAIL $2: $1 not empty: $(head -c 200 "$tmp/$1")"
  else
    passed=$((passed + 1))
  fi
}

usage='^usage: ember \[--help\] \[--version\] <command>'
check "--help" 0 out "$usage" -- --help
empty err "--help"
check "-h" 0 out "$usage" -- -h
check "help" 0 out "$usage" -- help
check "help inspect" 0 out "^usage: ember inspect FILE" -- help inspect
check "no command" 2 err "$usage" --
empty out "no command"
check "--version" 0 out "^ember [0-9]+\.[0-9]+\.[0-9]+$" -- --version
check "version" 0 out "^ember [0-9]+\.[0-9]+\.[0-9]+$" -- version
check "unknown command" 2 err "^ember: unknown command 'frobnicate'$" -- frobnicate
grep -q "Try 'ember --help'" "$tmp/err" && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL unknown command: no hint"; }
empty out "unknown command"
check "unknown option" 2 err "unknown option '--frob'" -- --frob
check "help of an unknown command" 2 err "unknown command 'nope'" -- help nope
for c in version devices inspect convert cuda-cache help; do
  check "$c --help" 0 out "^usage: ember $c" -- "$c" --help
  empty err "$c --help"
done
check "convert -h" 0 out "--dtype" -- convert -h
check "version extra" 2 err "unexpected argument 'x'" -- version x
check "devices extra" 2 err "unexpected argument 'x'" -- devices x
check "inspect nothing" 2 err "missing an argument" -- inspect
check "inspect two" 2 err "unexpected argument 'b'" -- inspect a b
check "inspect bad option" 2 err "unknown option '--bogus'" -- inspect --bogus f
check "convert one" 2 err "missing an argument" -- convert a
check "convert three" 2 err "unexpected argument 'c.safetensors'" -- convert a b.safetensors c.safetensors
check "convert --dtype missing" 2 err "'--dtype' needs a value" -- convert a b.safetensors --dtype
check "convert --dtype int" 2 err "--dtype takes f16, bf16, f32 or f64, not 'i32'" -- \
  convert --dtype i32 a b.safetensors
check "cuda-cache nothing" 2 err "missing an argument" -- cuda-cache

# inspect: decimal counts, human sizes, by content whatever the name
st="$fixtures/store/ref.safetensors"
check "inspect safetensors" 0 out "^  a +f32 +\[3, 4\] +48 B$" -- inspect "$st"
grep -Eq "^total: [0-9.]+ [KMG]?i?B \([0-9]+ bytes\)$" "$tmp/out" && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL total line: $(cat "$tmp/out")"; }
grep -q "writer = fixtures_store.py" "$tmp/out" && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL metadata: $(cat "$tmp/out")"; }
check "inspect pt" 0 out "^  w_f64 +f64 +\[2, 3\] +48 B$" -- inspect "$fixtures/store/types.pt"
cp "$st" "$tmp/weights.pt"
check "inspect by content" 0 out "4 tensors" -- inspect "$tmp/weights.pt"
check "inspect missing" 1 err "^ember: em_store_inspect: cannot open $tmp/missing.pt: no such file$" -- \
  inspect "$tmp/missing.pt"
mkfifo "$tmp/fifo.pt"
check "inspect FIFO" 1 err "is a FIFO, not a model file" -- inspect "$tmp/fifo.pt"
check "inspect duplicates" 1 err "duplicate tensor name \"a.b\"" -- \
  inspect "$fixtures/store/hostile/duplicate_names.pt"
check "inspect memo bomb" 1 err "work budget" -- inspect "$fixtures/store/hostile/memo_bomb.pt"
check "inspect truncated" 1 err "truncated or damaged zip archive" -- \
  inspect "$fixtures/store/hostile/truncated.pt"
check "inspect legacy" 1 err "legacy \(pre-1.6\)" -- inspect "$fixtures/store/hostile/legacy.pt"
check "inspect escapes control characters" 0 out '^  \\x1b\[2Jevil +f32' -- \
  inspect "$fixtures/store/hostile/control_chars.safetensors"
grep -q "$(printf '\033')" "$tmp/out" && { failed=$((failed + 1)); echo "FAIL raw escape printed"; } ||
  passed=$((passed + 1))
grep -q 'k\\x07 = v\\x1b\[31mred' "$tmp/out" && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL metadata escapes: $(cat -A "$tmp/out")"; }
check "inspect 8 GiB view" 0 out "8.0 GiB" -- inspect "$fixtures/store/hostile/expand_8g.pt"

# convert: safetensors only, by content, never onto a device
check "convert pt" 0 out "^wrote $tmp/types.safetensors$" -- \
  convert "$fixtures/store/types.pt" "$tmp/types.safetensors"
check "converted file" 0 out "converted_by = ember" -- inspect "$tmp/types.safetensors"
check "convert --dtype after operands" 0 out "wrote" -- \
  convert "$fixtures/store/types.pt" "$tmp/half.safetensors" --dtype f16
check "cast" 0 out "^  w_f64 +f16 +\[2, 3\] +12 B$" -- inspect "$tmp/half.safetensors"
check "convert to .pt" 2 err "must be a .safetensors file" -- \
  convert "$fixtures/store/types.pt" "$tmp/out.pt"
[ ! -e "$tmp/out.pt" ] && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL out.pt written"; }
ln -s /dev/null "$tmp/null.safetensors"
check "convert to a device" 1 err "character device; only regular files are replaced" -- \
  convert "$fixtures/store/types.pt" "$tmp/null.safetensors"
[ -c /dev/null ] && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL /dev/null replaced"; }
check "convert duplicates" 1 err "duplicate tensor name" -- \
  convert "$fixtures/store/hostile/duplicate_names.pt" "$tmp/d.safetensors"
check "convert expanded" 1 err "expanded view of 4 B that would take 8.0 GiB" -- \
  convert "$fixtures/store/hostile/expand_8g.pt" "$tmp/e.safetensors"
check "convert expanded with a cast" 1 err "expanded view of 4 B" -- \
  convert --dtype f16 "$fixtures/store/hostile/expand_8g.pt" "$tmp/e.safetensors"
check "convert overlapping" 1 err "materialising tensor \"w\"" -- \
  convert "$fixtures/store/hostile/overlap_16g.pt" "$tmp/o.safetensors"
check "convert missing" 1 err "cannot open $tmp/nope.pt: no such file" -- \
  convert "$tmp/nope.pt" "$tmp/x.safetensors"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
