# Robustness targets (issue 6; docs/robustness.md). Included by the Makefile.
#
#   make fuzz          build the weight-loader fuzzer (clang, -fsanitize=fuzzer,address,undefined)
#                      and run it FUZZ_TIME seconds (default 60) on tests/fuzz/corpus/
#   make fuzz-build    only build it; prints SKIP (and succeeds) when clang or libFuzzer
#                      (libclang-rt-14-dev) is missing. make check builds it; the 60 s run is
#                      tests/fuzz/fuzz_safetensors.sh (run by tests/run_tests.sh, exit 77 = skipped
#                      when the fuzzer could not be built)
#   make check-asan    libdenoise and every tests/unit/ and tests/emu/ *_test.cpp rebuilt with
#                      -fsanitize=address,undefined (LeakSanitizer on) in build/asan/, then run
#                      (tests/asan/run_asan.sh; DENOISE_VALGRIND=1 adds a valgrind run of ffmpeg).
#                      make check builds them too (asan-build) and runs them as one test,
#                      tests/asan/asan_check.sh

# ---- fuzzer
FUZZ_DIR := $(B)/fuzz
FUZZ_BIN := $(FUZZ_DIR)/fuzz_safetensors
FUZZ_TIME ?= 60
FUZZ_CXX := $(or $(shell command -v clang++-14 2>/dev/null),$(shell command -v clang++ 2>/dev/null))
FUZZ_CXXFLAGS := -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I$(TOP)/kernels
FUZZ_SRCS := $(TOP)/tests/fuzz/fuzz_safetensors.cpp $(TOP)/kernels/safetensors.cpp $(TOP)/kernels/model_config.cpp

$(FUZZ_BIN): $(FUZZ_SRCS) $(TOP)/kernels/safetensors.h $(TOP)/kernels/model_config.h $(TOP)/mk/robustness.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) $(FUZZ_SRCS) -o $@

.PHONY: fuzz-build fuzz
fuzz-build:
	@if [ -z "$(FUZZ_CXX)" ]; then \
	  echo "fuzz: SKIP: no clang++ (Debian: clang libclang-rt-14-dev, in mk/deps.sh)"; rm -f $(FUZZ_BIN); \
	elif ! $(MAKE) --no-print-directory $(FUZZ_BIN) >$(B)/fuzz-build.log 2>&1; then \
	  echo "fuzz: SKIP: $(FUZZ_CXX) could not build the fuzzer (libFuzzer runtime missing? libclang-rt-14-dev); see $(B)/fuzz-build.log"; \
	  tail -n 5 $(B)/fuzz-build.log; rm -f $(FUZZ_BIN); \
	fi

fuzz: fuzz-build
	@test -x $(FUZZ_BIN) || { echo "make fuzz: the fuzzer could not be built (see above)" >&2; exit 1; }
	$(RUN_ENV) DENOISE_FUZZ_TIME=$(FUZZ_TIME) $(SHELL) $(TOP)/tests/fuzz/fuzz_safetensors.sh

check: fuzz-build

# ---- ASan/UBSan build of the engine and the tests
ASAN_B := $(B)/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_LIB := $(ASAN_B)/libdenoise.a
# the CUDA objects (nvcc, not instrumented) join the instrumented C++ ones as they are
ASAN_LIB_OBJS := $(patsubst $(TOP)/%,$(ASAN_B)/obj/%.o,$(filter %.cpp,$(CXXSRCS))) $(call lib_obj,$(CU_SRCS))
ASAN_TESTS := $(foreach t,$(TEST_SRCS),$(ASAN_B)/tests/$(basename $(notdir $(t))))

$(ASAN_B)/obj/%.cpp.o: $(TOP)/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_DENOISE) -O1 $(ASAN_FLAGS) -MMD -MP -c $< -o $@

$(ASAN_LIB): $(ASAN_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(ASAN_B)/tests/%.o: $(TOP)/tests/%.cpp | $(FF_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_TESTS) -O1 $(ASAN_FLAGS) -MMD -MP -c $< -o $@

# asan_test_rule SRC: build/asan/tests/NAME_test from tests/KIND/NAME_test.cpp (as test_rule)
define asan_test_rule
$(ASAN_B)/tests/$(basename $(notdir $(1))): $(patsubst $(TOP)/tests/%.cpp,$(ASAN_B)/tests/%.o,$(1)) $(ASAN_LIB) $(if $(call is_lavfi,$(1)),$(FF_STAMP))
	$(CXX) $(ASAN_FLAGS) -o $$@ $$< $(ASAN_LIB) $(if $(call is_lavfi,$(1)),$$$$($(call ff_pkg,--libs))) $(ENGINE_LIBS) \
	    $(GTEST_LIBS) $(if $(call is_lavfi,$(1)),$$(RPATH_FLAGS) -Wl$(comma)-rpath$(comma)$(LIBDIR))
endef
$(foreach t,$(TEST_SRCS),$(eval $(call asan_test_rule,$(t))))

.PHONY: asan-build check-asan
asan-build: $(ASAN_TESTS)

check-asan: all asan-build
	$(RUN_ENV) DENOISE_ASAN_DIR=$(ASAN_B)/tests $(SHELL) $(TOP)/tests/asan/run_asan.sh

# make check builds the instrumented tests too; tests/asan/asan_check.sh runs them (about 2 min
# extra in all on the 2-core machine, docs/robustness.md)
check: asan-build

-include $(shell find $(ASAN_B)/obj $(ASAN_B)/tests -name '*.d' 2>/dev/null)

.PHONY: robustness-clean
robustness-clean:
	rm -rf $(ASAN_B) $(FUZZ_DIR) $(B)/fuzz-build.log
clean: robustness-clean
