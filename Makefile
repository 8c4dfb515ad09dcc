# Everyday commands; the build itself is CMake's.
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE ?= cmake

.PHONY: all configure test check demo sanitize asan install docs clean format format-check bench

# The libraries (libember and its components, static and shared), the ember command and the
# examples.
all: configure
	$(CMAKE) --build $(BUILD) -j $(JOBS) --target ember_programs

configure:
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

# Builds everything, the tests too, and runs the tests.
test: configure
	$(CMAKE) --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite as CI runs it (installs packages, gcc + sanitizer builds, format check).
check:
	bash scripts/test.sh

# The main job: builds and runs the example program.
demo:
	bash scripts/demo.sh

# AddressSanitizer + UndefinedBehaviorSanitizer build and test run.
sanitize:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON >/dev/null
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)
asan: sanitize

# CPU benchmarks against PyTorch and OpenBLAS (bench/run.sh; prints one table).
bench:
	bash bench/run.sh

install: all
	$(CMAKE) --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

# The API reference from the public headers' comments (Doxygen) in $(BUILD)/docs/html; the
# public functions without a comment are listed in $(BUILD)/docs/undocumented.txt.
docs:
	bash scripts/docs.sh $(BUILD)/docs

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan
