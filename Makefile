# Thin wrapper over CMake. `make demo` and `make test` work on a fresh Debian 12 machine: they
# install the dependencies (apt) first.
BUILD ?= build
MODEL ?= gpt
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build test demo bench format clean check-deps

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The demo builds only what it runs (bin/train, bin/preprocess: scripts/demo.sh), not the tests.
demo: configure
	@MODEL=$(MODEL) BUILD=$(BUILD) JOBS=$(JOBS) scripts/demo.sh

bench: build
	@scripts/bench.sh

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')

# Includes must follow engine <- ops <- parallel <- model; io depends on engine only.
check-deps:
	@scripts/check-deps.sh

clean:
	rm -rf $(BUILD)
