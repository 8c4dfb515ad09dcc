#!/usr/bin/env bash
# The API reference (`make docs`): Doxygen over the public headers into OUT/html (default
# build/docs), and the public declarations that have no comment, listed in OUT/undocumented.txt.
# Needs doxygen (Debian: apt-get install doxygen).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/docs}
if ! command -v doxygen >/dev/null; then
  echo "make docs needs doxygen (Debian: apt-get install doxygen)" >&2
  exit 1
fi
mkdir -p "$out"
EMBER_DOCS_OUT=$(cd "$out" && pwd)
EMBER_VERSION=$(sed -n 's/^project(ember VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
export EMBER_DOCS_OUT EMBER_VERSION
rm -rf "$EMBER_DOCS_OUT/html"
doxygen docs/Doxyfile
# Doxygen warns about undocumented members only when it leaves them out (EXTRACT_ALL = NO): a
# second pass, without output, for that list.
{
  cat docs/Doxyfile
  echo "EXTRACT_ALL = NO"
  echo "GENERATE_HTML = NO"
  echo "GENERATE_XML = YES"
  echo "XML_OUTPUT = undocumented-xml"
  echo "WARN_IF_UNDOCUMENTED = YES"
  echo "WARN_LOGFILE = $EMBER_DOCS_OUT/undocumented.log"
} | doxygen - >/dev/null
grep ' is not documented' "$EMBER_DOCS_OUT/undocumented.log" |
  sed "s|^$PWD/||; s/: warning: / /" | sort -t: -k1,1 -k2,2n >"$EMBER_DOCS_OUT/undocumented.txt" || true
rm -rf "$EMBER_DOCS_OUT/undocumented.log" "$EMBER_DOCS_OUT/undocumented-xml"
echo "API reference: $EMBER_DOCS_OUT/html/index.html"
echo "without a comment: $(grep -c '(function)' "$EMBER_DOCS_OUT/undocumented.txt" || true) public" \
  "functions ($(wc -l <"$EMBER_DOCS_OUT/undocumented.txt") declarations with types, fields and" \
  "macros), listed in $EMBER_DOCS_OUT/undocumented.txt"
if [ -s "$EMBER_DOCS_OUT/warnings.txt" ]; then
  echo "Doxygen's other warnings: $EMBER_DOCS_OUT/warnings.txt"
fi
