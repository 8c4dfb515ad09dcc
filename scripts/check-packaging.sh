#!/usr/bin/env bash
# Packaging checks, run by scripts/test.sh after the gcc build; BUILD_DIR is that build.
#  1. `make` builds the libraries, the ember command and the examples; `make test` runs ctest.
#     Each shared library exports exactly the functions its headers declare with EM_API, and
#     the core's loads only libc, libm, libpthread and libdl (scripts/check-exports.sh).
#  2. Every public header compiles on its own as C11 and as C++17 (pedantic, warnings as errors).
#  3. Installed into a prefix that is then moved (the exports checked again there): an outside
#     CMake project finds it with find_package(Ember COMPONENTS ...) and runs the README's example
#     linked to Ember::ember and to Ember::ember_static, and a program that calls every
#     component linked to Ember::pt, Ember::data, Ember::train and to their static variants.
#  4. pkg-config, as the README says: the example against libember.so (LD_LIBRARY_PATH, rpath),
#     against libember.a with `pkg-config --static`, and the README's C++ version with g++; the
#     components' program with ember-pt, ember-data and ember-train, shared and static.
#  5. An outside CMake project add_subdirectory()s this tree and links Ember::ember; the build
#     names neither CMAKE_SOURCE_DIR nor CMAKE_BINARY_DIR.
#  6. scripts/check-docs.sh: the functions the docs call exist.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(cd "${1:?usage: scripts/check-packaging.sh BUILD_DIR}" && pwd)
jobs=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "check-packaging: $*" >&2
  exit 1
}
# block HEADING LANG: the first ```LANG block after the line HEADING of README.md
block() {
  awk -v h="$1" -v l='```'"$2" '$0 == h {f = 1; next} f == 1 && $0 == l {f = 2; next}
    f == 2 && /^```/ {exit} f == 2 {print}' README.md
}
block '## A taste' c >"$work/taste.c"
block '### From C++' cpp >"$work/taste.cpp"
[ -s "$work/taste.c" ] || fail "README.md: no C block under '## A taste'"
[ -s "$work/taste.cpp" ] || fail "README.md: no cpp block under '### From C++'"
# a program that calls each component library (and the core)
cat >"$work/parts.c" <<'EOF2'
#include <ember/ember.h>
#include <stdio.h>

int main(void)
{
    em_tensor *x = em_arange(0, 6, 1, EM_F32, EM_CPU);
    em_dataset *ds = em_dataset_from_tensors(&x, NULL, 1); /* ember-data */
    em_metrics *m = em_metrics_new(1);                     /* ember-train */
    em_status st = em_pt_register();                       /* ember-pt */
    if (!ds || !m || st != EM_OK || em_dataset_len(ds) != 6) {
        fprintf(stderr, "parts: %s\n", em_last_error());
        return 1;
    }
    em_metrics_free(m);
    em_dataset_free(ds);
    em_release(x);
    return 0;
}
EOF2
# run NAME PROGRAM...: runs a built example in the scratch folder (it writes mlp.safetensors)
run() {
  local name=$1
  shift
  (cd "$work" && "$@" >"$work/$name.out" 2>&1) || fail "$name failed: $(tail -3 "$work/$name.out")"
}
no_libember() { # the program does not load libember.so or a component's library
  ! readelf -d "$1" | grep -q 'NEEDED.*libember' || fail "$1 needs libember*.so"
}
only_core() { # a program linked to the core's shared library loads no component's
  readelf -d "$1" | grep -q 'NEEDED.*libember\.so' || fail "$1 does not load libember.so"
  ! readelf -d "$1" | grep -q 'NEEDED.*libember-' || fail "$1 loads a component's library"
}

echo "-- make and make test"
make --no-print-directory BUILD="$build" >/dev/null
for f in libember.a libember.so libember-pt.a libember-pt.so libember-data.a libember-data.so \
  libember-train.a libember-train.so ember tour fashion_mnist mnist regression charlm; do
  [ -e "$build/$f" ] || [ -e "$build/example_$f" ] || fail "make did not build $f"
done
make -n --no-print-directory BUILD="$build" test | grep -q ctest || fail "make test runs no ctest"
bash scripts/check-exports.sh "$build"

echo "-- public headers as C11 and C++17"
for h in include/ember/*.h; do
  printf '#include <ember/%s>\n' "${h##*/}" >"$work/h.c"
  cp "$work/h.c" "$work/h.cpp"
  gcc -std=c11 -Wall -Wextra -Wpedantic -Werror -Iinclude -I"$build/gen/include" -c "$work/h.c" -o "$work/h.o" ||
    fail "$h does not compile as C11"
  g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -Iinclude -I"$build/gen/include" -c "$work/h.cpp" -o "$work/h.o" ||
    fail "$h does not compile as C++17"
done
if command -v clang++ >/dev/null; then
  printf '#include <ember/ember.h>\n' >"$work/h.cpp"
  clang++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -Iinclude -I"$build/gen/include" -c "$work/h.cpp" -o "$work/h.o" ||
    fail "ember.h does not compile with clang++"
fi

echo "-- install, then find_package(Ember) from an outside CMake project"
cmake --install "$build" --prefix "$work/stage" >/dev/null
mv "$work/stage" "$work/prefix" # the installed tree is relocatable
prefix=$work/prefix
pcdir=$(dirname "$(find "$prefix" -name ember.pc)")
libdir=$(dirname "$pcdir")
mkdir "$work/fp"
cp "$work/taste.c" "$work/parts.c" "$work/fp/"
cat >"$work/fp/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(ember_find_package C)
find_package(Ember 0.1 REQUIRED COMPONENTS ember ember_static pt data train pt_static data_static
             train_static)
add_executable(taste_shared taste.c)
target_link_libraries(taste_shared PRIVATE Ember::ember)
add_executable(taste_static taste.c)
target_link_libraries(taste_static PRIVATE Ember::ember_static)
add_executable(parts_shared parts.c)
target_link_libraries(parts_shared PRIVATE Ember::pt Ember::data Ember::train)
add_executable(parts_static parts.c)
target_link_libraries(parts_static PRIVATE Ember::pt_static Ember::data_static Ember::train_static)
EOF
cmake -S "$work/fp" -B "$work/fp/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$work/fp.log" 2>&1 || fail "$(cat "$work/fp.log")"
cmake --build "$work/fp/build" -j "$jobs" >>"$work/fp.log" 2>&1 || fail "$(cat "$work/fp.log")"
run find_package_shared "$work/fp/build/taste_shared"
only_core "$work/fp/build/taste_shared"
run find_package_static "$work/fp/build/taste_static"
no_libember "$work/fp/build/taste_static"
run find_package_parts_shared "$work/fp/build/parts_shared"
run find_package_parts_static "$work/fp/build/parts_static"
no_libember "$work/fp/build/parts_static"
# a newer minor version or an unknown component is refused
mkdir "$work/fp2"
cat >"$work/fp2/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(ember_find_package_refusals C)
find_package(Ember 0.2 QUIET)
if(Ember_FOUND)
  message(FATAL_ERROR "find_package(Ember 0.2) accepted ${Ember_VERSION}")
endif()
find_package(Ember QUIET COMPONENTS no_such_component)
if(Ember_FOUND)
  message(FATAL_ERROR "find_package(Ember COMPONENTS no_such_component) succeeded")
endif()
EOF
cmake -S "$work/fp2" -B "$work/fp2/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/fp2.log" 2>&1 ||
  fail "$(cat "$work/fp2.log")"

# the installed libraries export their public functions only
bash scripts/check-exports.sh "$libdir" >/dev/null

echo "-- pkg-config: shared, static, C++"
export PKG_CONFIG_PATH=$pcdir
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/taste.c" $(pkg-config --cflags --libs ember) -o "$work/t_so"
run pkgconfig_ld_library_path env LD_LIBRARY_PATH="$libdir" "$work/t_so"
only_core "$work/t_so"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/taste.c" $(pkg-config --cflags --libs ember) \
  -Wl,-rpath,"$libdir" -o "$work/t_rpath"
run pkgconfig_rpath "$work/t_rpath"
# libember.a, the rest as shared libraries (the README's line)
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/taste.c" $(pkg-config --cflags ember) \
  "$(pkg-config --variable=libdir ember)/libember.a" -Wl,--as-needed \
  $(pkg-config --static --libs ember) -o "$work/t_a"
run pkgconfig_static "$work/t_a"
no_libember "$work/t_a"
# a prefix holding only libember.a: `pkg-config --static` alone must list every dependency
cp -a "$prefix" "$work/prefix_a"
rm -f "$work/prefix_a/${libdir#"$prefix"/}"/libember*.so*
# shellcheck disable=SC2046
cc -std=c11 "$work/taste.c" $(PKG_CONFIG_PATH="$work/prefix_a/${pcdir#"$prefix"/}" \
  pkg-config --static --cflags --libs ember) -o "$work/t_a_only"
run pkgconfig_static_only "$work/t_a_only"
# the components: shared (each .pc requires the core), then static from the .a-only prefix
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/parts.c" \
  $(pkg-config --cflags --libs ember-pt ember-data ember-train) -Wl,-rpath,"$libdir" -o "$work/p_so"
run pkgconfig_parts "$work/p_so"
# shellcheck disable=SC2046
cc -std=c11 "$work/parts.c" $(PKG_CONFIG_PATH="$work/prefix_a/${pcdir#"$prefix"/}" \
  pkg-config --static --cflags --libs ember-pt ember-data ember-train) -o "$work/p_a_only"
run pkgconfig_parts_static_only "$work/p_a_only"
no_libember "$work/p_a_only"
# shellcheck disable=SC2046
g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror "$work/taste.cpp" \
  $(pkg-config --cflags --libs ember) -Wl,-rpath,"$libdir" -o "$work/t_cpp"
run cxx "$work/t_cpp"

echo "-- add_subdirectory() from an outside CMake project"
if git ls-files >/dev/null 2>&1; then
  cmake_files=$(git ls-files 'CMakeLists.txt' '*/CMakeLists.txt' '*.cmake' '*.cmake.in')
else
  cmake_files=$(find . -path ./build\* -prune -o \( -name CMakeLists.txt -o -name '*.cmake' \
    -o -name '*.cmake.in' \) -print)
fi
# shellcheck disable=SC2086
if grep -n 'CMAKE_SOURCE_DIR\|CMAKE_BINARY_DIR' $cmake_files; then
  fail "use PROJECT_SOURCE_DIR / CMAKE_CURRENT_SOURCE_DIR (and the BINARY forms) instead"
fi
mkdir "$work/sub"
cp "$work/taste.c" "$work/parts.c" "$work/sub/"
cat >"$work/sub/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(ember_add_subdirectory C)
add_subdirectory("$root" ember)
foreach(t ember_cli example_tour fashion_mnist ember_testlib)
  if(TARGET \${t})
    message(FATAL_ERROR "Ember as a subproject defines \${t}: programs and tests must be off")
  endif()
endforeach()
add_executable(taste taste.c)
target_link_libraries(taste PRIVATE Ember::ember)
add_executable(parts parts.c)
target_link_libraries(parts PRIVATE Ember::pt Ember::data Ember::train)
EOF
cmake -S "$work/sub" -B "$work/sub/build" -DCMAKE_BUILD_TYPE=Release >"$work/sub.log" 2>&1 ||
  fail "$(cat "$work/sub.log")"
cmake --build "$work/sub/build" -j "$jobs" --target taste parts >>"$work/sub.log" 2>&1 ||
  fail "$(tail -30 "$work/sub.log")"
run add_subdirectory "$work/sub/build/taste"
run add_subdirectory_parts "$work/sub/build/parts"

echo "-- docs"
EMBER_BUILD="$build" bash scripts/check-docs.sh

echo "packaging checks passed"
