#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need (skips apt when all are present).
set -euo pipefail
pkgs=(cmake make gcc clang clang-format pkg-config libzip-dev
      zlib1g-dev libpng-dev libjpeg-dev libsqlite3-dev dataset-fashion-mnist libncurses-dev
      python3-sklearn) # python3-sklearn: the digits data set of optim.test_digits
need=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
# clang's sanitizer runtime (ASan, UBSan, LeakSanitizer)
if ! ls /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.asan-x86_64.a >/dev/null 2>&1 &&
   ! ls /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.asan-aarch64.a >/dev/null 2>&1; then
  need+=(libclang-rt-14-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
