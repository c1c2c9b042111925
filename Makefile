# denoise: top-level build. See docs/build.md.
#
#   make              libdenoise, FFmpeg (with the denoise filter), tools, tests
#   make check        all, then tests/run_tests.sh
#   make demo         all, then tools/demo.sh
#   make check-gpu | bench | eval      tools/check_gpu.sh | bench.sh | eval.sh
#   make check-faithful  all, then tests/cli/cli_faithful.sh alone (also part of make check)
#   make install PREFIX=DIR
#   make clean        engine/tests/tools objects (keeps FFmpeg's build)
#   make distclean    everything under build/ and config.mk
#
# Everything built lands in build/: bin/ (ffmpeg, ffprobe, tools), lib/ (FFmpeg's shared libs,
# libdenoise.a, pkgconfig/), include/, tests/ (test binaries), and the work folders obj/,
# src/ (fetched sources), ffmpeg-build/ (FFmpeg's out-of-tree build), apt/, dl/, deps/.

SHELL := /bin/bash
.DEFAULT_GOAL := all
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

# ---------------------------------------------------------------------------------------------
# configuration: ./configure writes config.mk; without one, make runs ./configure (defaults)
# and restarts; when configure changes, it is re-run with the arguments recorded in config.mk.
-include $(TOP)/config.mk
$(TOP)/config.mk: $(TOP)/configure
	cd $(TOP) && ./configure $(CONFIGURE_ARGS)

ifeq ($(wildcard $(TOP)/config.mk),)
# (nothing configured yet: the rule above creates config.mk and make restarts)
PREFIX ?= /usr/local
else
PREFIX ?= $(CONFIGURED_PREFIX)
endif

comma := ,
B := $(TOP)/build
OBJ := $(B)/obj
LIBDIR := $(B)/lib
LIBDENOISE := $(LIBDIR)/libdenoise.a
FFSRC := $(B)/src/ffmpeg
FFBUILD := $(B)/ffmpeg-build
NVCH_SRC := $(B)/src/nv-codec-headers
DEPS_PREFIX := $(B)/deps
FF_STAMP := $(B)/.ffmpeg-installed
CONFIG_H := $(TOP)/filter/denoise_config.h
WEIGHTS := $(TOP)/weights/denoise-v2.safetensors
BUILD_WEIGHTS_LINK := $(B)/share/denoise/denoise-v2.safetensors
FILTER_PRESENT := $(if $(wildcard $(FILTER_SRC)),yes,)

# ---------------------------------------------------------------------------------------------
# libdenoise (C++17, -O2, position independent: it is linked into libavfilter.so)
# the engine (kernels/), the host code it shares with both backends (kernels/common/), the CPU backend
CXXSRCS := $(sort $(wildcard $(TOP)/kernels/*.cpp) $(wildcard $(TOP)/kernels/common/*.cpp) \
                  $(wildcard $(TOP)/kernels/cpu/*.cpp))
# the fused kernels' weight images and descriptors (kernels/cuda/swin_*.cpp) are plain host code
# that make check tests on the CPU: built in every configuration
SWIN_HOST_SRCS := $(sort $(wildcard $(TOP)/kernels/cuda/swin_*.cpp))
CXXSRCS += $(SWIN_HOST_SRCS)
# the CUDA engine: built whenever configure found nvcc (./configure --disable-cuda-engine opts out);
# the one build runs with and without a GPU or driver (cudart static, docs/cuda.md)
CU_SRCS := $(if $(filter yes,$(CUDA)),$(if $(filter yes,$(CUDA_ENGINE)),$(sort $(wildcard $(TOP)/kernels/cuda/*.cu))))
HAVE_CUDA := $(if $(CU_SRCS),yes,)
# host-side CUDA sources (kernels/cuda/*.cpp) are built only with the .cu files
CXXSRCS += $(if $(HAVE_CUDA),$(filter-out $(SWIN_HOST_SRCS),$(sort $(wildcard $(TOP)/kernels/cuda/*.cpp))))

CUDA_ARCH_FLAGS := -gencode arch=compute_80,code=sm_80 \
                   -gencode arch=compute_89,code=sm_89 \
                   -gencode arch=compute_90,code=[sm_90,compute_90]
# kernels/cuda/swin_mlp_wgmma.cu (the Hopper MLP probe, docs/fused.md) is wgmma code, which only
# the architecture-specific sm_90a target has: that file alone is built for sm_90a (CUDA 12.0 or
# newer has it) and DENOISE_SM90A tells its host code so; with an older nvcc it is built like the
# rest, without a kernel body, and reports itself unsupported at run time. Every other file keeps
# CUDA_ARCH_FLAGS.
NVCC_MAJOR := $(if $(HAVE_CUDA),$(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\)\..*/\1/p'))
CUDA_SM90A_FLAGS := $(if $(filter-out 0 1 2 3 4 5 6 7 8 9 10 11,$(NVCC_MAJOR)),-gencode arch=compute_90a$(comma)code=sm_90a -DDENOISE_SM90A=1,$(CUDA_ARCH_FLAGS))
# the targets of one object: CUDA_ARCH_FLAGS unless the object sets its own
NVCC_ARCH = $(CUDA_ARCH_FLAGS)
$(OBJ)/kernels/cuda/swin_mlp_wgmma.cu.o: NVCC_ARCH = $(CUDA_SM90A_FLAGS)
CUDA_DEFS := $(if $(HAVE_CUDA),-DDENOISE_HAVE_CUDA=1 -I$(CUDA_HOME)/include)
# cuBLASLt is a shared library outside ld.so's paths on these machines: RUNPATH to the toolkit
CUDA_LIBS := $(if $(HAVE_CUDA),-L$(CUDA_HOME)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA_HOME)/lib64 -lcublasLt -lcudart_static -ldl -lrt)

# the CPU engine uses OpenMP (GCC's libgomp) next to OpenBLAS's own threads
OPENMP_CFLAGS := -fopenmp
OPENMP_LIBS := -lgomp
CXXFLAGS_DENOISE := -std=c++17 -O2 -g -fPIC -Wall -Wextra $(OPENMP_CFLAGS) -I$(TOP)/kernels $(PLACEBO_CFLAGS) $(CUDA_DEFS) $(EXTRA_CXXFLAGS)
NVCCFLAGS_DENOISE := -std=c++17 -O2 -Xcompiler -fPIC,-fopenmp -I$(TOP)/kernels $(PLACEBO_CFLAGS) $(CUDA_DEFS)
# what anything linking libdenoise.a needs after it (libplacebo: colour matrices, blue noise)
ENGINE_LIBS := $(CUDA_LIBS) -lopenblas $(PLACEBO_LIBS) $(OPENMP_LIBS) -lstdc++ -lm -lpthread
# what libavfilter needs for the denoise filter (goes into libavfilter.pc's Libs.private)
DENOISE_EXTRALIBS := -L$(LIBDIR) -ldenoise $(ENGINE_LIBS) -lz

lib_obj = $(patsubst $(TOP)/%,$(OBJ)/%.o,$(1))
LIB_OBJS := $(call lib_obj,$(CXXSRCS) $(CU_SRCS))

# flags_file FILE,VARNAME: FILE holds VARNAME's value and is rewritten (new mtime) only when
# that value changes, so what depends on FILE rebuilds exactly when the flags change
define flags_file
$(1): FORCE
	$$(shell mkdir -p $$(dir $$@))$$(file >$$@.tmp,$$($(2)))
	@cmp -s $$@.tmp $$@ && rm -f $$@.tmp || mv -f $$@.tmp $$@
endef
LIB_FLAGS_TEXT = $(CXX) $(CXXFLAGS_DENOISE) $(NVCC) $(NVCCFLAGS_DENOISE) $(CUDA_ARCH_FLAGS) $(CUDA_SM90A_FLAGS) $(LIB_OBJS)
$(eval $(call flags_file,$(OBJ)/cxxflags,LIB_FLAGS_TEXT))

$(OBJ)/%.cpp.o: $(TOP)/%.cpp $(OBJ)/cxxflags
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_DENOISE) -MMD -MP -c $< -o $@

$(OBJ)/%.cu.o: $(TOP)/%.cu $(OBJ)/cxxflags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS_DENOISE) $(NVCC_ARCH) -MMD -MP -c $< -o $@

$(LIBDENOISE): $(LIB_OBJS) $(OBJ)/cxxflags
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

$(LIBDIR)/pkgconfig/denoise.pc: $(OBJ)/cxxflags
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$(B)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: denoise' 'Description: neural video denoiser engine (static)' 'Version: 1' \
	  'Requires: libplacebo' 'Libs: -L$${libdir} -ldenoise $(ENGINE_LIBS)' 'Cflags: -I$${includedir}' > $@

$(B)/include/denoise.h: $(TOP)/kernels/denoise.h
	@mkdir -p $(dir $@)
	cp $< $@

.PHONY: libdenoise
libdenoise: $(LIBDENOISE) $(LIBDIR)/pkgconfig/denoise.pc $(B)/include/denoise.h

# ---------------------------------------------------------------------------------------------
# the filter's compile-time configuration (git-ignored, regenerated when a value changes).
# DENOISE_DATADIR is the folder of the default weights. In the build tree it is build/share/denoise
# (a link to weights/denoise-v2.safetensors), so the build tree's ffmpeg uses the source tree's
# weights whatever is installed under any prefix; `make install` builds the copy it installs with
# PREFIX/share/denoise and no source-tree fallback (INSTALL_VARIANT=1), then rebuilds the build
# tree's own filter.
INSTALL_VARIANT ?=
FILTER_DATADIR := $(if $(INSTALL_VARIANT),$(PREFIX)/share/denoise,$(B)/share/denoise)
define CONFIG_H_TEXT
/* generated by the Makefile: do not edit, do not commit */
#ifndef DENOISE_CONFIG_H
#define DENOISE_CONFIG_H
/* folder of the default weights denoise-v2.safetensors: $(if $(INSTALL_VARIANT),the install prefix's,the build tree's (a link to weights/)) */
#define DENOISE_DATADIR "$(FILTER_DATADIR)"
$(if $(INSTALL_VARIANT),/* DENOISE_BUILD_WEIGHTS: not defined (an installed filter never reads the source tree) */,/* the weights in the source tree$(comma) for running from the build tree */
#define DENOISE_BUILD_WEIGHTS "$(WEIGHTS)")
$(if $(HAVE_CUDA),#define DENOISE_HAVE_CUDA 1,/* DENOISE_HAVE_CUDA: not defined (no CUDA kernel sources, or CUDA disabled) */)
#endif
endef
$(eval $(call flags_file,$(CONFIG_H),CONFIG_H_TEXT))

# ---------------------------------------------------------------------------------------------
# FFmpeg and nv-codec-headers sources
$(FFSRC)/.denoise-origin:
ifeq ($(FFMPEG_SOURCE),)
	sh $(TOP)/mk/fetch-debsrc.sh $(B) ffmpeg 7.1. $(FFSRC) $(DEB_MIRROR)
else
	rm -rf $(FFSRC) && mkdir -p $(B)/src
	cp -a $(FFMPEG_SOURCE) $(FFSRC)
	echo "ffmpeg from --ffmpeg-source=$(FFMPEG_SOURCE)" > $@
endif

$(NVCH_SRC)/.denoise-origin:
	sh $(TOP)/mk/fetch-debsrc.sh $(B) nv-codec-headers 12. $(NVCH_SRC) $(DEB_MIRROR)

$(DEPS_PREFIX)/lib/pkgconfig/ffnvcodec.pc: $(NVCH_SRC)/.denoise-origin
	$(MAKE) -C $(NVCH_SRC) PREFIX=$(DEPS_PREFIX) install

.PHONY: fetch
fetch: $(FFSRC)/.denoise-origin $(if $(filter none,$(FFMPEG_CUDA)),,$(NVCH_SRC)/.denoise-origin)

# ---------------------------------------------------------------------------------------------
# FFmpeg. Two component sets (./configure --ffmpeg-components=):
#   full     every native component (decoders, encoders, (de)muxers, parsers, bsfs, protocols,
#            devices, filters) plus the external libraries of FF_EXTLIBS_full [default]
#   minimal  only what the project's tools and tests use (FF_* lists below): a shorter build
#            and smaller libraries, for development and for copying to a GPU machine
FF_PROTOCOLS := file pipe fd
FF_DEMUXERS := yuv4mpegpipe matroska mov nut rawvideo image2 image2pipe png_pipe h264 hevc lavfi
# denoise-batch joins segments with the concat demuxer; its test compares frames with framemd5
FF_DEMUXERS += concat
FF_MUXERS := yuv4mpegpipe matroska mov mp4 nut rawvideo image2 image2pipe null h264 hevc
FF_MUXERS += framemd5
FF_DECODERS := rawvideo ffv1 h264 hevc png wrapped_avframe pcm_s16le
FF_ENCODERS := rawvideo ffv1 png libx264 wrapped_avframe pcm_s16le
FF_PARSERS := h264 hevc png
FF_BSFS := h264_mp4toannexb hevc_mp4toannexb
FF_HWACCELS := h264_nvdec hevc_nvdec
FF_INDEVS := lavfi
FF_FILTERS := testsrc testsrc2 color nullsrc scale format hwupload hwdownload \
    psnr ssim crop hstack vstack pad setpts trim select split null nullsink scdet sendcmd \
    hqdn3d nlmeans bm3d atadenoise fftdnoiz vaguedenoiser noise \
    showinfo metadata fps setsar tpad concat copy \
    aformat anull atrim asetpts aresample anullsrc abuffer abuffersink buffer buffersink
FF_CUDA_FILTERS := hwupload_cuda *_cuda
ifneq ($(FILTER_PRESENT),)
FF_FILTERS += denoise
endif

# External libraries of the full set: Debian bookworm's -dev packages (mk/deps.sh), so that
# ordinary files work in and out. x264 and x265 are GPL: the build is --enable-gpl; none of
# these needs --enable-version3 (FFmpeg's EXTERNAL_LIBRARY_VERSION3_LIST) or --enable-nonfree.
FF_EXTLIBS_full := libx264 libx265 libvpx libdav1d libaom libsvtav1 libwebp \
    libmp3lame libopus libvorbis libsoxr \
    libfreetype libfontconfig libfribidi libharfbuzz libass libzimg libxml2 gnutls \
    zlib bzlib lzma iconv
FF_EXTLIBS_minimal := libx264 zlib

list = $(subst $(eval) ,$(comma),$(strip $(1)))
FF_COMPONENT_FLAGS_minimal := --disable-everything --disable-postproc \
    --enable-protocol=$(call list,$(FF_PROTOCOLS)) \
    --enable-demuxer=$(call list,$(FF_DEMUXERS)) \
    --enable-muxer=$(call list,$(FF_MUXERS)) \
    --enable-decoder=$(call list,$(FF_DECODERS)) \
    --enable-encoder=$(call list,$(FF_ENCODERS)) \
    --enable-parser=$(call list,$(FF_PARSERS)) \
    --enable-bsf=$(call list,$(FF_BSFS)) \
    --enable-indev=$(call list,$(FF_INDEVS)) \
    --enable-filter=$(call list,$(FF_FILTERS))
# full: FFmpeg's defaults enable every native component; a missing filter source must not be
# built (its registration is injected all the same)
FF_COMPONENT_FLAGS_full := $(if $(FILTER_PRESENT),,--disable-filter=denoise)

FF_CUDA_FLAGS_llvm := --enable-cuda --enable-nvdec --enable-ffnvcodec --enable-cuda-llvm \
    --nvcc=$(CLANG) --enable-hwaccel=$(call list,$(FF_HWACCELS)) \
    --enable-filter='$(call list,$(FF_CUDA_FILTERS))'
FF_CUDA_FLAGS_nvcc := --enable-cuda --enable-nvdec --enable-ffnvcodec --enable-cuda-nvcc \
    --enable-nonfree --nvcc=$(NVCC) --nvccflags='-gencode arch=compute_80$(comma)code=sm_80 -O2' \
    --extra-cflags=-I$(CUDA_HOME)/include --extra-ldflags=-L$(CUDA_HOME)/lib64 \
    --enable-hwaccel=$(call list,$(FF_HWACCELS)) \
    --enable-filter='$(call list,$(FF_CUDA_FILTERS))'
FF_CUDA_FLAGS_none := --disable-cuda --disable-nvdec --disable-ffnvcodec

FFMPEG_COMPONENTS ?= full
FFMPEG_CONFIG_FLAGS := --prefix=$(B) --enable-shared --disable-static \
    --disable-autodetect --disable-doc --enable-gpl --enable-pthreads \
    --cc=$(CC) --cxx=$(CXX) \
    $(FF_COMPONENT_FLAGS_$(FFMPEG_COMPONENTS)) \
    $(addprefix --enable-,$(FF_EXTLIBS_$(FFMPEG_COMPONENTS))) \
    $(FF_CUDA_FLAGS_$(FFMPEG_CUDA)) \
    --extra-cflags='-I$(TOP)/kernels $(PLACEBO_CFLAGS)' \
    '--extra-ldexeflags=-Wl,-rpath,\\\$$\$$ORIGIN/../lib' \
    '--extra-ldsoflags=-Wl,-rpath,\\\$$\$$\$$\$$ORIGIN' \
    $(EXTRA_FFMPEG_FLAGS)

FF_PKG_CONFIG_PATH := $(DEPS_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))

FF_FLAGS_TEXT = $(FFMPEG_CONFIG_FLAGS) $(DENOISE_EXTRALIBS) $(FF_PKG_CONFIG_PATH)
$(eval $(call flags_file,$(B)/ffmpeg.flags,FF_FLAGS_TEXT))

FF_PREREQS := $(FFSRC)/.denoise-origin $(B)/ffmpeg.flags $(CONFIG_H) libdenoise \
    $(if $(filter none,$(FFMPEG_CUDA)),,$(DEPS_PREFIX)/lib/pkgconfig/ffnvcodec.pc)

# inject (cheap, idempotent) -> configure when its inputs changed -> make -> install into build/
.PHONY: ffmpeg
ffmpeg: $(FF_PREREQS)
	sh $(TOP)/filter/inject.sh $(FFSRC) $(if $(FILTER_PRESENT),$(FILTER_SRC),-) $(CONFIG_H) \
	    '$(DENOISE_EXTRALIBS)' $(LIBDENOISE)
ifeq ($(FILTER_PRESENT),)
	@echo "*** WARNING: $(FILTER_SRC) does not exist: FFmpeg is built WITHOUT the denoise filter ***"
endif
	@if [ ! -f $(FFBUILD)/ffbuild/config.mak ] || [ $(B)/ffmpeg.flags -nt $(FFBUILD)/ffbuild/config.mak ] \
	    || [ $(FFSRC)/configure -nt $(FFBUILD)/ffbuild/config.mak ] \
	    || [ $(FFSRC)/libavfilter/allfilters.c -nt $(FFBUILD)/ffbuild/config.mak ]; then \
	  echo "configuring FFmpeg in $(FFBUILD) (log: $(FFBUILD)/ffbuild/config.log)"; \
	  mkdir -p $(FFBUILD) && cd $(FFBUILD) && \
	  PKG_CONFIG_PATH=$(FF_PKG_CONFIG_PATH) $(FFSRC)/configure $(FFMPEG_CONFIG_FLAGS) > configure.out 2>&1 \
	    || { tail -n 30 configure.out; tail -n 40 ffbuild/config.log; exit 1; }; \
	  touch ffbuild/config.mak; \
	fi
	+$(MAKE) -C $(FFBUILD) -j$(JOBS)
	@if [ ! -f $(FF_STAMP) ] || [ -n "$$(find $(FFBUILD) -maxdepth 2 -newer $(FF_STAMP) \
	      \( -name 'lib*.so*' -o -name ffmpeg -o -name ffprobe -o -name '*.pc' \) -print -quit)" ]; then \
	  if [ ! -f $(FF_STAMP) ] || [ $(FFBUILD)/ffbuild/config.mak -nt $(FF_STAMP) ]; then \
	    echo "installing FFmpeg into $(B)"; $(MAKE) -C $(FFBUILD) install >/dev/null; \
	  else \
	    echo "installing FFmpeg's libraries and programs into $(B)"; \
	    $(MAKE) -C $(FFBUILD) install-libs install-progs >/dev/null; \
	  fi && touch $(FF_STAMP); \
	fi

# ---------------------------------------------------------------------------------------------
# tools: tools/NAME.c|cpp -> build/bin/denoise-NAME with '_' -> '-' (tools/noise.c ->
# denoise-noise, tools/cpu_bench.cpp -> denoise-cpu-bench: installed names that collide with no
# other package's), linked with libdenoise; *_lavfi.* also get FFmpeg
FF_PC := libavfilter libavformat libavcodec libswscale libswresample libavutil
ff_pkg = PKG_CONFIG_PATH=$(LIBDIR)/pkgconfig pkg-config $(1) $(FF_PC)
RPATH_FLAGS := -Wl,-rpath,'$$ORIGIN/../lib'

TOOL_SRCS := $(sort $(wildcard $(TOP)/tools/*.c) $(wildcard $(TOP)/tools/*.cpp))
tool_bin = $(B)/bin/denoise-$(subst _,-,$(basename $(notdir $(1))))
TOOLS := $(foreach t,$(TOOL_SRCS),$(call tool_bin,$(t)))
CFLAGS_TOOLS := -O2 -g -Wall -I$(TOP)/kernels -I$(B)/include $(PLACEBO_CFLAGS) $(CUDA_DEFS)

$(OBJ)/tools/%.c.o: $(TOP)/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(CFLAGS_TOOLS) -MMD -MP -c $< -o $@
$(OBJ)/tools/%.cpp.o: $(TOP)/tools/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(CFLAGS_TOOLS) -MMD -MP -c $< -o $@

define tool_rule
$(call tool_bin,$(1)): $(OBJ)/tools/$(notdir $(1)).o $(LIBDENOISE) $(if $(findstring _lavfi.,$(1)),$(FF_STAMP))
	@mkdir -p $$(dir $$@)
	$(CXX) -o $$@ $$< -Wl,--as-needed $(LIBDENOISE) $(ENGINE_LIBS) \
	    $(if $(findstring _lavfi.,$(1)),$$$$($(call ff_pkg,--libs)) $(RPATH_FLAGS)) -lm
endef
$(foreach t,$(TOOL_SRCS),$(eval $(call tool_rule,$(t))))
$(filter $(OBJ)/tools/%_lavfi.c.o $(OBJ)/tools/%_lavfi.cpp.o,$(patsubst $(TOP)/tools/%,$(OBJ)/tools/%.o,$(TOOL_SRCS))): $(FF_STAMP)

# tools/cuda_bench/*.cpp (one file per mode): one program, build/bin/denoise-cuda-bench, with the
# CUDA engine; it shares the tests' host bf16 helper and the fused Swin block's device harness
CUDA_BENCH_SRCS := $(if $(HAVE_CUDA),$(sort $(wildcard $(TOP)/tools/cuda_bench/*.cpp)))
CUDA_BENCH := $(if $(CUDA_BENCH_SRCS),$(B)/bin/denoise-cuda-bench)
TOOLS += $(CUDA_BENCH)
$(OBJ)/tools/cuda_bench/%.cpp.o: CFLAGS_TOOLS += -I$(TOP)/tests/common -I$(TOP)/tests/gpu
$(CUDA_BENCH): $(patsubst $(TOP)/tools/%,$(OBJ)/tools/%.o,$(CUDA_BENCH_SRCS)) $(LIBDENOISE)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $(filter %.o,$^) -Wl,--as-needed $(LIBDENOISE) $(ENGINE_LIBS) -lm

.PHONY: tools
tools: $(TOOLS)

# ---------------------------------------------------------------------------------------------
# denoise-batch (tools/denoise-batch, the package tools/denoise_batch/, docs/scale-out.md): a
# Python program. The launcher finds the package in ../share/denoise/python: in the build tree a
# link to tools/denoise_batch, in an install a copy.
BATCH_BIN := $(B)/bin/denoise-batch
BATCH_PKG := $(B)/share/denoise/python/denoise_batch
$(BATCH_BIN): $(TOP)/tools/denoise-batch
	install -D -m 755 $< $@
$(BATCH_PKG):
	@mkdir -p $(dir $@)
	ln -sfn $(TOP)/tools/denoise_batch $@

.PHONY: denoise-batch install-denoise-batch
denoise-batch: $(BATCH_BIN) $(BATCH_PKG)
all: denoise-batch
install: install-denoise-batch
install-denoise-batch: denoise-batch
	install -d $(DESTDIR)$(PREFIX)/share/denoise/python/denoise_batch
	install -m 644 $(TOP)/tools/denoise_batch/*.py $(DESTDIR)$(PREFIX)/share/denoise/python/denoise_batch/

# ---------------------------------------------------------------------------------------------
# tests, by kind (tests/README.md):
#   tests/unit/NAME_test.cpp (host code) and tests/emu/NAME_test.cpp (the tensor-core kernels on
#   the warp emulator): GoogleTest, -> build/tests/NAME_test, linked with libdenoise;
#   NAME_lavfi_test also with the built FFmpeg libraries (build/lib/pkgconfig). Helpers
#   tests/common/*.cpp go into build/tests/libtesthelpers.a, linked into every test.
#   tests/gpu/NAME_check.cpp: GPU checks (one program per area on the harness tests/gpu/harness.h,
#   not GoogleTest), -> build/tests/gpu/NAME_check, built with the CUDA engine so that `make check`
#   compiles them; run_tests.sh runs them (exit 77 without a GPU: skipped).
TEST_SRCS := $(sort $(wildcard $(TOP)/tests/unit/*_test.cpp) $(wildcard $(TOP)/tests/emu/*_test.cpp))
GPU_CHECK_SRCS := $(sort $(wildcard $(TOP)/tests/gpu/*_check.cpp))
GPU_CHECKS := $(if $(HAVE_CUDA),$(patsubst $(TOP)/tests/gpu/%.cpp,$(B)/tests/gpu/%,$(GPU_CHECK_SRCS)))
HELPER_SRCS := $(sort $(wildcard $(TOP)/tests/common/*.cpp))
test_bin = $(B)/tests/$(basename $(notdir $(1)))
test_obj = $(patsubst $(TOP)/tests/%.cpp,$(OBJ)/tests/%.o,$(1))
TESTS := $(foreach t,$(TEST_SRCS),$(call test_bin,$(t)))
LAVFI_TEST_SRCS := $(filter %_lavfi_test.cpp,$(TEST_SRCS))
HELPER_LIB := $(if $(HELPER_SRCS),$(B)/tests/libtesthelpers.a)
CXXFLAGS_TESTS := -std=c++17 -O2 -g -Wall $(OPENMP_CFLAGS) -I$(TOP)/kernels -I$(TOP)/tests/common -I$(B)/include $(PLACEBO_CFLAGS) $(GTEST_CFLAGS) \
    $(CUDA_DEFS) -DDENOISE_SOURCE_DIR='"$(TOP)"' -DDENOISE_BUILD_DIR='"$(B)"' \
    -DDENOISE_TEST_DATA_DIR='"$(TOP)/tests/data"'

$(OBJ)/tests/%.o: $(TOP)/tests/%.cpp $(OBJ)/cxxflags
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_TESTS) -MMD -MP -c $< -o $@

$(HELPER_LIB): $(call test_obj,$(HELPER_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# lavfi tests and helpers may include FFmpeg's headers: compile them after FFmpeg is installed
$(call test_obj,$(LAVFI_TEST_SRCS) $(HELPER_SRCS)): | $(FF_STAMP)

# test_rule SRC: build/tests/NAME_test from tests/KIND/NAME_test.cpp; lavfi tests (and every test
# when there are helpers, which may use FFmpeg) also link the FFmpeg libraries. $$$$: $(call) and
# $(eval) each expand once, and the shell must see $(pkg-config ...).
is_lavfi = $(findstring _lavfi_test.,$(1))
define test_rule
$(call test_bin,$(1)): $(call test_obj,$(1)) $(HELPER_LIB) $(LIBDENOISE) $(if $(call is_lavfi,$(1)),$(FF_STAMP))
	@mkdir -p $$(dir $$@)
	$(CXX) -o $$@ $$< $(HELPER_LIB) $(LIBDENOISE) $(if $(call is_lavfi,$(1)),$$$$($(call ff_pkg,--libs))) \
	    $(ENGINE_LIBS) $(GTEST_LIBS) \
	    $(if $(call is_lavfi,$(1)),$$(RPATH_FLAGS),$(if $(HELPER_SRCS),$$$$($(call ff_pkg,--libs)) $$(RPATH_FLAGS)))
endef
$(foreach t,$(TEST_SRCS),$(eval $(call test_rule,$(t))))

# tests/gpu/api_run.h writes the tiles checks' crops as PNG (libpng)
$(GPU_CHECKS): $(B)/tests/gpu/%: $(OBJ)/tests/gpu/%.o $(LIBDENOISE)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $< $(LIBDENOISE) $(ENGINE_LIBS) -lpng

# FF_STAMP is made by the ffmpeg target
$(FF_STAMP): | ffmpeg
	@test -f $@

.PHONY: tests
tests: $(TESTS) $(GPU_CHECKS)

# ---------------------------------------------------------------------------------------------
.PHONY: all
all: libdenoise ffmpeg tools tests $(if $(wildcard $(WEIGHTS)),$(BUILD_WEIGHTS_LINK))
	@echo "built: $(B)/bin/ffmpeg $(B)/bin/ffprobe $(LIBDENOISE)$(if $(TOOLS), $(TOOLS))$(if $(TESTS), $(TESTS))"

RUN_ENV := DENOISE_SOURCE_DIR=$(TOP) DENOISE_BUILD_DIR=$(B) PATH=$(B)/bin:$$PATH

.PHONY: check demo check-gpu bench eval check-faithful
check: all
	$(RUN_ENV) $(SHELL) $(TOP)/tests/run_tests.sh

check-faithful: all
	$(RUN_ENV) sh $(TOP)/tests/cli/cli_faithful.sh

demo: all
	$(RUN_ENV) $(SHELL) $(TOP)/tools/demo.sh

# $$ in the recipe: $(call) and $(eval) each expand once, and RUN_ENV's $$PATH must reach the
# shell intact.
define script_target
$(1): all
	@test -f $(TOP)/tools/$(2) || { echo "make $(1): tools/$(2) does not exist yet (nothing to run)" >&2; exit 1; }
	$$(RUN_ENV) $$(SHELL) $$(TOP)/tools/$(2)
endef
$(eval $(call script_target,check-gpu,check_gpu.sh))
$(eval $(call script_target,bench,bench.sh))
$(eval $(call script_target,eval,eval.sh))

# ---------------------------------------------------------------------------------------------
# the build tree's weights folder (DENOISE_DATADIR of the build tree's filter)
$(BUILD_WEIGHTS_LINK):
	@mkdir -p $(dir $@)
	ln -sfn $(WEIGHTS) $@

# ---------------------------------------------------------------------------------------------
# install: FFmpeg's programs, libraries, headers and .pc files (re-pointed to PREFIX), libdenoise,
# denoise.h, the weights. The filter that is installed is built for PREFIX/share/denoise
# (INSTALL_VARIANT=1: vf_denoise.o recompiled, libavfilter and the programs relinked), copied,
# and the build tree's own filter is rebuilt afterwards, also when the copy fails.
DESTDIR ?=
.PHONY: install
install: all
	@test -n "$(PREFIX)" || { echo "install: PREFIX is empty" >&2; exit 1; }
	$(MAKE) --no-print-directory INSTALL_VARIANT=1 PREFIX=$(PREFIX) ffmpeg
	@set -e; rc=0; { \
	  install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	      $(DESTDIR)$(PREFIX)/share/denoise && \
	  cp -a $(B)/bin/. $(DESTDIR)$(PREFIX)/bin/ && \
	  cp -a $(LIBDIR)/lib*.so* $(LIBDENOISE) $(DESTDIR)$(PREFIX)/lib/ && \
	  cp -a $(B)/include/. $(DESTDIR)$(PREFIX)/include/ && \
	  { [ ! -d $(B)/share/ffmpeg ] || { install -d $(DESTDIR)$(PREFIX)/share/ffmpeg && \
	      cp -a $(B)/share/ffmpeg/. $(DESTDIR)$(PREFIX)/share/ffmpeg/; }; } && \
	  for f in $(LIBDIR)/pkgconfig/*.pc; do \
	    sed -e 's|^prefix=.*|prefix=$(PREFIX)|' -e 's|$(B)|$(PREFIX)|g' $$f \
	        > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$(basename $$f) || exit 1; \
	  done && \
	  if [ -f $(WEIGHTS) ]; then install -m 644 $(WEIGHTS) $(DESTDIR)$(PREFIX)/share/denoise/; \
	  else echo "install: $(WEIGHTS) does not exist yet: no weights installed"; fi; \
	} || rc=$$?; \
	echo "install: installed into $(DESTDIR)$(PREFIX) (status $$rc); rebuilding the build tree's own filter"; \
	$(MAKE) --no-print-directory ffmpeg >/dev/null; exit $$rc

# robustness: make fuzz, fuzz-build (part of check), check-asan (docs/robustness.md)
include $(TOP)/mk/robustness.mk

# ---------------------------------------------------------------------------------------------
# keep intermediate objects (chained pattern rules would delete them)
.SECONDARY:

.PHONY: clean distclean ffmpeg-clean FORCE
FORCE:
clean:
	rm -rf $(OBJ) $(LIBDENOISE) $(B)/tests $(TOOLS)
ffmpeg-clean:
	rm -rf $(FFBUILD) $(FF_STAMP)
distclean:
	rm -rf $(B) $(TOP)/config.mk $(CONFIG_H)

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
