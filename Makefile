# Clockwork's front door. On a fresh Debian 12 machine these are the only commands you need:
#
#   make test    install missing Debian packages, configure build/, build, run every test
#   make demo    the same set-up, then run the demo
#
# Also: make docs (the course site: handouts and API, formulas and figures), make bench
# (CPU-backend costs, then `clockwork bench` on the CPU backend, plotted in build/bench.svg),
# make showcase (a standalone CUDA program on the CPU backend), make build (no tests),
# make clean; make m1, make m2, ... (one milestone's test programs built and run: the edit loop);
# make autograder (build/autograder.zip, Gradescope's autograder: see handouts/instructor-guide.md).
# Variables: BUILD=dir, PRESET=name (see CMakePresets.json).

BUILD  ?= build
PRESET ?= default
JOBS   ?= $(shell nproc)

# Debian packages the build needs. The CUDA toolkit is not in Debian's main archive: see README.
# DOC_PACKAGES are for the course site and the plots only, and TEST_PACKAGES for the project's
# own tests (clang-14 and libclang-rt-14-dev, libFuzzer and the sanitizer runtimes, which clang
# only recommends, build the parser fuzz targets: ctest -L fuzz). The autograder's setup.sh
# leaves both out (make print-packages).
DOC_PACKAGES := doxygen graphviz libjs-mathjax chromium gnuplot-nox
TEST_PACKAGES := clang-14 libclang-rt-14-dev
PACKAGES := cmake ninja-build g++ make pkg-config ccache libgtest-dev libboost-context-dev \
            nlohmann-json3-dev libpcre2-dev libtorch-dev \
            $(DOC_PACKAGES) $(TEST_PACKAGES)
# GCC's plugin headers, for the CPU backend's FLOP counter (counting mode): the package is named
# after GCC's major version (12 on Debian 12, also before g++ is installed).
GCC_MAJOR := $(shell gcc -dumpversion 2>/dev/null | cut -d. -f1)
PACKAGES += gcc-$(or $(GCC_MAJOR),12)-plugin-dev

# The CUDA headers the CPU backend compiles against: the CUDA toolkit's when it is installed,
# otherwise those of NVIDIA's header wheels on PyPI, fetched with pip into .cuda-headers/ (pinned
# and checksummed in tools/cuda-headers/requirements.txt); the build is then the CPU backend only.
CUDA_HEADERS_DIR := $(CURDIR)/.cuda-headers
HAVE_CUDA_TOOLKIT := $(shell nvcc --version >/dev/null 2>&1 && echo yes; \
  for d in "$$CUDA_PATH" /usr/local/cuda /usr; do [ -f "$$d/include/cuda_runtime.h" ] && echo yes; done)
ifeq ($(HAVE_CUDA_TOOLKIT),)
PACKAGES += python3-pip
CUDA_HEADERS_FLAG := -DCLOCKWORK_CUDA_HEADERS=$(CUDA_HEADERS_DIR)/include
endif

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test demo showcase docs bench build configure configure-now deps cuda-headers clean \
        autograder print-packages

# make m1, make m2, ...: the edit loop. Builds only that milestone's test programs and runs its
# tests (not the slow ones), printing what failed.
MILESTONE_TARGETS := $(patsubst milestones/milestone%,m%,$(wildcard milestones/milestone[0-9]*))
.PHONY: $(MILESTONE_TARGETS)
$(MILESTONE_TARGETS): m%: configure
	@cmake --build $(BUILD) -j $(JOBS) --target milestone$*_tests
	@cd $(BUILD) && exclude='slow|cuda'; \
	  grep -q '^CLOCKWORK_EDIT_LOOP_CUDA:BOOL=ON' CMakeCache.txt && exclude=slow; \
	  ctest -L '^milestone$*$$' -LE "$$exclude" -j $(JOBS) --output-on-failure

# Each phase timed; the times are printed at the end, also when a phase fails.
test:
	@phase() { name=$$1; shift; t=$$(date +%s); "$$@"; rc=$$?; \
	  d=$$(( $$(date +%s) - t )); times="$$times, $$name $$((d / 60))m$$(printf %02d $$((d % 60)))s"; \
	  return $$rc; }; \
	report() { echo; echo "make test took$${times#,} (total $$(( ($$(date +%s) - start) / 60 ))m$$(printf %02d $$(( ($$(date +%s) - start) % 60 )))s)."; }; \
	start=$$(date +%s); times=""; \
	phase packages $(MAKE) --no-print-directory deps && \
	phase configure $(MAKE) --no-print-directory configure-now && \
	phase build cmake --build $(BUILD) -j $(JOBS) && \
	phase tests sh -c 'cd $(BUILD) && ctest --output-on-failure -j $(JOBS)'; \
	rc=$$?; report; exit $$rc

demo: configure
	cmake --build $(BUILD) --target clockwork
	$(BUILD)/bin/clockwork demo

showcase: configure
	cmake --build $(BUILD) --target cudasim-showcase
	$(BUILD)/bin/cudasim-showcase
	@echo
	@echo "The same program with a deliberate bug, a __syncthreads() inside a branch:"
	@$(BUILD)/bin/cudasim-showcase --divergent; \
	  status=$$?; echo "(exit status $$status: the CPU backend stopped the program)"; [ $$status -eq 70 ]

docs: configure
	cmake --build $(BUILD) --target docs

bench: configure
	cmake --build $(BUILD) --target cudasim-bench clockwork
	$(BUILD)/bin/cudasim-bench
	@echo
	@$(BUILD)/bin/clockwork tiny-model --out $(BUILD)/bench-model --force >/dev/null
	$(BUILD)/bin/clockwork bench --model $(BUILD)/bench-model --plot $(BUILD)/bench.svg

autograder: configure
	cmake --build $(BUILD) --target autograder

# The packages a build needs, for the autograder's setup.sh.
print-packages:
	@echo $(filter-out $(DOC_PACKAGES) $(TEST_PACKAGES),$(PACKAGES))

build: configure
	cmake --build $(BUILD) -j $(JOBS)

configure: deps
	@$(MAKE) --no-print-directory configure-now

configure-now:
	@if [ ! -f $(BUILD)/CMakeCache.txt ]; then \
	  cmake --preset $(PRESET) -B $(BUILD) $(CUDA_HEADERS_FLAG); \
	fi

deps:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
ifeq ($(HAVE_CUDA_TOOLKIT),)
	@echo "No CUDA toolkit here: the CPU backend is built against NVIDIA's header wheels (no GPU targets)."
	@tools/cuda-headers/fetch $(CUDA_HEADERS_DIR)
endif

# Only the wheel headers, fetched whether or not the toolkit is installed, e.g. for a build with
# -DCLOCKWORK_CUDA_HEADERS=$(CUDA_HEADERS_DIR)/include.
cuda-headers:
	tools/cuda-headers/fetch $(CUDA_HEADERS_DIR)

clean:
	rm -rf $(BUILD)
