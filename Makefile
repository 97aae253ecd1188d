# Meridian front door. Every target installs what it needs from Debian's archive first
# (scripts/install-deps is quiet when nothing is missing), then drives CMake in build/.
BUILD ?= build
JOBS  ?= $(shell nproc)
# CUDA=auto builds the CUDA backend when nvcc is found; CUDA=0 forces it off; CUDA=1 requires it.
CUDA  ?= auto
TYPE  ?= Release
CMAKE_FLAGS ?=
# TARGET=NAME builds one CMake target (and what it needs) instead of everything.
TARGET ?=

.PHONY: all build deps test test-fast demo bench bench-wan sim-membership sanitize fuzz endurance gpu-kit docker-check deb deb-check format clean help

all: build

help:
	@echo "make            build everything into $(BUILD)/ (the command is $(BUILD)/meridian)"
	@echo "make test       build and run the whole test suite"
	@echo "make test-fast  build the tests and run only the in-process [unit] cases (seconds)"
	@echo "make demo       train across several local sites with an emulated WAN and print the result"
	@echo "make bench      run the benchmarks side by side with their peers (writes docs/benchmarks.md)"
	@echo "make bench-wan  the papers' experiments under the emulated WAN, ~40 min (writes docs/results.md);"
	@echo "                QUICK=1 for a few minutes"
	@echo "make sim-membership  the membership protocol simulated at 100 sites and more, a few minutes niced"
	@echo "                (SIM_ARGS=\"--sites 16,100 --loss 0,0.01\", see bench/membership_simulation.cc)"
	@echo "make sanitize   build and run the tests under ASan/UBSan in build-sanitize/"
	@echo "make fuzz       libFuzzer (clang, ASan/UBSan): each target, or FUZZ_TARGET=NAME, for FUZZ_RUNS executions (default 1000000)"
	@echo "make endurance  8 sites for 10 minutes: memory, descriptors, sockets, abandoned rounds (ENDURANCE_ARGS=\"--minutes 2\")"
	@echo "make gpu-kit    CUDA build in build-cuda/ packed into gpu-kit/ (<= 60 MiB) to run on a GPU machine (docs/cuda.md)"
	@echo "make docker-check  build the CPU image with a dockerd of its own and check a 4-container federation (root; ~30 min first, ~2 min after)"
	@echo "make deb        the Debian package (binary, meridian@.service, docs) in $(BUILD)/meridian_VERSION_ARCH.deb"
	@echo "make deb-check  install the package into a fresh debootstrap root and run a site from it (root; minutes the first time)"
	@echo "make format     apply .clang-format to every tracked C++ and CUDA source"
	@echo "options: CUDA=auto|0|1  JOBS=N  TYPE=Release|Debug"

deps:
	@scripts/install-deps build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) -DMERIDIAN_CUDA=$(CUDA) $(CMAKE_FLAGS) > /dev/null
	@cmake --build $(BUILD) -j $(JOBS) $(if $(TARGET),--target $(TARGET)) -- --no-print-directory

test:
	@scripts/install-deps test
	@$(MAKE) --no-print-directory build
	@scripts/run-tests $(BUILD)

test-fast:
	@scripts/install-deps test
	@$(MAKE) --no-print-directory build TARGET=meridian_tests
	@scripts/run-tests $(BUILD) "[unit]"

# The demo needs only the `meridian` command: building the test suite too would triple its wait on a
# fresh 2-core machine.
demo:
	@scripts/install-deps demo
	@$(MAKE) --no-print-directory build TARGET=meridian
	@scripts/demo $(BUILD)

bench:
	@scripts/install-deps bench
	@$(MAKE) --no-print-directory build
	@bench/run-all $(BUILD)

# Separate from bench and test: it takes about 30 minutes on 2 cores (QUICK=1: a few) and runs niced.
bench-wan:
	@scripts/install-deps demo
	@$(MAKE) --no-print-directory build
	@nice bench/bench_wan.py --build $(BUILD) $(if $(QUICK),--quick)

# The membership protocol simulated at scale (docs/peer-network.md, "Membership at scale"): minutes on
# one core, niced.
SIM_ARGS ?= --sites 16,100 --loss 0,0.01 --computed-sites 1000,10000 --probe-sites 100,1000,10000
sim-membership:
	@scripts/install-deps build
	@$(MAKE) --no-print-directory build TARGET=meridian_bench_membership_simulation
	@nice -n 10 $(BUILD)/meridian_bench_membership_simulation $(SIM_ARGS)

sanitize:
	@scripts/install-deps test
	@$(MAKE) --no-print-directory build BUILD=build-sanitize TYPE=Debug CUDA=0 \
	    CMAKE_FLAGS="-DMERIDIAN_SANITIZE=ON"
	@scripts/run-tests build-sanitize

# FUZZ_TARGET=NAME runs one target (tests/fuzz/NAME_fuzzer.cc), the default `all` runs each in turn.
# A target's seed corpus (tests/fuzz/corpus/NAME/) is copied so that the fuzzer's discoveries do not grow
# the repository. A crashing input lands in build-fuzz/NAME-crash-*: fix the code it reached, then keep
# the input in tests/fuzz/regressions/NAME/ (the normal test suite replays those folders).
# FUZZ_SECONDS=N also stops each target after N seconds; FUZZ_FLAGS adds libFuzzer flags.
FUZZ_RUNS ?= 1000000
FUZZ_SECONDS ?= 0
FUZZ_TARGET ?= all
FUZZ_FLAGS ?=
FUZZ_TARGETS := wire_decoder checkpoint model_file roster site_config csv npy idx image_file
fuzz_selected = $(if $(filter all,$(FUZZ_TARGET)),$(FUZZ_TARGETS),$(FUZZ_TARGET))
fuzz:
	@scripts/install-deps fuzz
	@cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DMERIDIAN_CUDA=0 -DCMAKE_C_COMPILER=clang \
	    -DCMAKE_CXX_COMPILER=clang++ -DMERIDIAN_SANITIZE=ON -DMERIDIAN_FUZZ=ON > /dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $(addsuffix _fuzzer,$(fuzz_selected)) -- --no-print-directory
	@for t in $(fuzz_selected); do \
	    rm -rf build-fuzz/corpus/$$t && mkdir -p build-fuzz/corpus && cp -r tests/fuzz/corpus/$$t build-fuzz/corpus/$$t && \
	    build-fuzz/$${t}_fuzzer -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
	        -artifact_prefix=build-fuzz/$$t- $(FUZZ_FLAGS) build-fuzz/corpus/$$t \
	        $$(test -d tests/fuzz/regressions/$$t && echo tests/fuzz/regressions/$$t) || exit 1; \
	done

# Not part of `make test`: it runs for ENDURANCE_ARGS' --minutes (10 by default).
ENDURANCE_ARGS ?=
endurance:
	@$(MAKE) --no-print-directory build
	@MERIDIAN=$(BUILD)/meridian scripts/endurance $(ENDURANCE_ARGS)

# Needs nvcc, cuBLAS and cuDNN here (no GPU); the kit's run does the rest on the device.
gpu-kit:
	@scripts/install-deps demo
	@JOBS=$(JOBS) scripts/gpu-kit

# Not part of `make test`: its own dockerd, the image built from scratch, a container federation (root).
docker-check:
	@scripts/docker-check

deb:
	@scripts/install-deps deb
	@$(MAKE) --no-print-directory build TARGET=meridian
	@packaging/build-deb $(BUILD)

# Not part of `make test`: a debootstrap root (cached beside docker-check's), apt-get, chroot (root).
deb-check:
	@scripts/install-deps deb
	@$(MAKE) --no-print-directory build TARGET=meridian
	@packaging/check-deb $(BUILD)

format:
	@scripts/install-deps format
	@git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-sanitize build-fuzz build-cuda gpu-kit
