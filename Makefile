# llmchat — one build for the program, its tests and tools.
#   make deps       install the Debian packages the build needs
#   make            build/llmchat
#   make test       every test that needs no GPU; ends with "N passed, N failed"
#   make check-layers  fails when an #include crosses the layering (scripts/check-layers)
#                   or a call does, or .c files of a folder call each other in a new
#                   circle (scripts/check-calls; builds the objects first)
#   make test-cuda  CUDA parity tests (needs a GPU)
#   make test-asan  the whole suite with the program itself built with ASan + UBSan
#   make test-tsan  ThreadSanitizer: the engine and kernel tests, the server and the
#                   UI driven through a TSan-built program
#   make fuzz       libFuzzer targets (clang) for the GGUF reader, the server's JSON
#                   requests, the tokenizer and grammars, each for FUZZ_SECONDS (default 60)
#   make CUDA=0     force a CPU-only build even when nvcc is present
# Library code is built twice: optimised for the program, and with
# AddressSanitizer + UBSan for the unit tests (build/asan/).

CC      ?= cc
BUILD   := build
PKGS    := libcjson libpcre2-8 libxxhash sqlite3 ncursesw libmicrohttpd libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lcjson -lpcre2-8 -lxxhash -lsqlite3 -lncursesw -lmicrohttpd -lcurl)

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -I. $(PKG_CFLAGS) -MMD -MP -pthread
SAN_FLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDLIBS  := $(PKG_LIBS) -lm -lpthread

# ---- CUDA: only when nvcc is found (CUDA=0 turns it off) ----
CUDA_HOME ?= /usr/local/cuda
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
ifeq ($(CUDA),0)
NVCC :=
endif
CU_SRC := $(if $(NVCC),$(wildcard kernels/cuda/*.cu))
# CUDA_ARCH: the GPU generation the code is built for (90 = H100/H200), plus PTX
# that newer GPUs compile at load; older GPUs are refused at start with a clear line.
# cudart is linked statically, so the binary runs on a GPU machine that has the
# driver and cuBLAS but not this machine's runtime (scripts/gpu-check).
CUDA_ARCH ?= 90
ifneq ($(CU_SRC),)
ALL_CFLAGS += -DLLC_CUDA -I$(CUDA_HOME)/include
LDLIBS     += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
NVCCFLAGS  := -O3 -std=c++17 -I. -DLLC_CUDA_ARCH=$(CUDA_ARCH) -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
              -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) -Xcompiler -Wall,-Wno-unknown-pragmas
endif

LIB_SRC := $(wildcard engine/*/*.c kernels/*.c kernels/cpu/*.c kernels/cuda/*.c ui/*.c storage/*.c)
APP_SRC := $(wildcard app/*.c app/server/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TOOL_SRC := $(wildcard tests/tools/*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
ASAN_OBJ := $(LIB_SRC:%.c=$(BUILD)/asan/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)

.PHONY: all deps test test-asan test-tsan fuzz test-cuda test-arm clean check-layers check-calls
all: $(BUILD)/llmchat

$(BUILD)/libllmchat.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libllmchat_asan.a: $(ASAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/llmchat: $(APP_OBJ) $(BUILD)/libllmchat.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<

# Unit tests run under AddressSanitizer + UBSan.
$(BUILD)/tests/%: tests/%.c tests/test.h tests/engine_util.h tests/engine_beam_ref.h tests/fake_openai.h $(BUILD)/libllmchat_asan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -o $@ $< $(BUILD)/libllmchat_asan.a $(LDLIBS)

$(BUILD)/tools/%: tests/tools/%.c tests/fake_openai.h $(BUILD)/libllmchat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libllmchat.a $(LDLIBS)

# Tools named srv_* test the socket server in-process: they link the app objects too.
APP_LIB_OBJ := $(filter-out $(BUILD)/obj/app/main.o,$(APP_OBJ))
$(BUILD)/tools/srv_%: tests/tools/srv_%.c $(APP_LIB_OBJ) $(BUILD)/libllmchat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(APP_LIB_OBJ) $(BUILD)/libllmchat.a $(LDLIBS)

# The official OpenAI and Ollama JavaScript clients the server tests drive,
# installed from the lock file (npm registry) into tests/js/node_modules.
JS_CLIENTS := tests/js/node_modules/.package-lock.json
$(JS_CLIENTS): tests/js/package.json tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund --loglevel=error

test: $(BUILD)/llmchat $(TEST_BIN) $(TOOL_BIN) $(JS_CLIENTS)
	@sh tests/run.sh $(TEST_BIN)

check-layers:
	@sh scripts/check-layers
	@$(MAKE) --no-print-directory check-calls

# check-calls: which .c file calls which (nm on the objects), no circle inside a
# folder but the ones docs/ARCHITECTURE.md explains, no call up the layering.
check-calls: $(LIB_OBJ) $(APP_OBJ)
	@sh scripts/check-calls $(BUILD)/obj


# ---- sanitizer builds ----
# test-asan: the unit tests are ASan + UBSan already; the program the CLI scripts
# drive is built the same way (build/asan/llmchat). Reports go to log files that
# tests/run_san.sh prints (a report fails the run even where a script would have
# swallowed the program's stderr).
ASAN_APP_OBJ := $(APP_SRC:%.c=$(BUILD)/asan/%.o)
$(BUILD)/asan/llmchat: $(ASAN_APP_OBJ) $(BUILD)/libllmchat_asan.a
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)

# cli_server_load.sh is left out: its checks race wall-clock limits (a stream
# still running after N ms) that a sanitized program on a busy machine misses.
ASAN_SCRIPTS := $(filter-out tests/cli_server_load.sh,$(wildcard tests/cli_*.sh))
test-asan: $(BUILD)/asan/llmchat $(TEST_BIN) $(TOOL_BIN) $(JS_CLIENTS)
	@LLMCHAT=$(BUILD)/asan/llmchat LLC_CLI_SCRIPTS="$(ASAN_SCRIPTS)" \
	    sh tests/run_san.sh asan $(BUILD)/asan/logs $(TEST_BIN)

# test-tsan: everything that runs more than one thread — the engine thread and
# its clients, the CPU worker pool under the kernels and the model, the server
# and the UI (through the CLI scripts on a TSan-built program). The SIMD-level
# repeats of `make test` are left out: the threads are the same.
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJ   := $(LIB_SRC:%.c=$(BUILD)/tsan/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
TSAN_APP_OBJ := $(APP_SRC:%.c=$(BUILD)/tsan/%.o)
TSAN_TESTS := test_engine test_engine_beam test_engine_spec test_model test_matmul \
              test_attention test_elementwise test_pool
TSAN_TEST_BIN := $(TSAN_TESTS:%=$(BUILD)/tsan/tests/%)
TSAN_SCRIPTS := tests/cli_model.sh tests/cli_server.sh tests/cli_spec.sh tests/cli_ui.sh tests/cli_ui_edges.sh

$(BUILD)/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TSAN_FLAGS) -c -o $@ $<

$(BUILD)/libllmchat_tsan.a: $(TSAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tsan/llmchat: $(TSAN_APP_OBJ) $(BUILD)/libllmchat_tsan.a
	$(CC) $(ALL_CFLAGS) $(TSAN_FLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tsan/tests/%: tests/%.c tests/test.h tests/engine_util.h tests/engine_beam_ref.h $(BUILD)/libllmchat_tsan.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TSAN_FLAGS) -o $@ $< $(BUILD)/libllmchat_tsan.a $(LDLIBS)

test-tsan: $(BUILD)/tsan/llmchat $(TSAN_TEST_BIN) $(TOOL_BIN) $(JS_CLIENTS)
	@LLMCHAT=$(BUILD)/tsan/llmchat LLC_CLI_SCRIPTS="$(TSAN_SCRIPTS)" LLC_NO_SIMD_RERUN=1 \
	    sh tests/run_san.sh tsan $(BUILD)/tsan/logs $(TSAN_TEST_BIN)

# ---- fuzzing (clang + libFuzzer; not part of `make test`) ----
# The library and app objects are rebuilt with clang, ASan + UBSan and fuzzer
# coverage under build/fuzz/; each target runs FUZZ_SECONDS on a corpus seeded
# by tests/fuzz/seeds.c. Crashes are kept in build/fuzz/artifacts/.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_OBJ     := $(LIB_SRC:%.c=$(BUILD)/fuzz/%.o) $(filter-out $(BUILD)/fuzz/app/main.o,$(APP_SRC:%.c=$(BUILD)/fuzz/%.o)) \
                $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
FUZZ_TARGETS := gguf tokenizer json grammar answer
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

$(BUILD)/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

# The CPU kernels pick instruction sets with #pragma GCC target, which clang
# ignores: they are built by $(CC), uninstrumented (the targets reach them little).
$(BUILD)/fuzz/kernels/cpu/%.o: kernels/cpu/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/libllmchat_fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/libllmchat_fuzz.a
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libllmchat_fuzz.a $(LDLIBS)

$(BUILD)/fuzz/seeds: tests/fuzz/seeds.c $(BUILD)/libllmchat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libllmchat.a $(LDLIBS)

fuzz: $(FUZZ_BIN) $(BUILD)/fuzz/seeds
	@sh tests/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# CUDA parity tests: only with a GPU (tests/cuda/*.c link the optimised library).
$(BUILD)/tests/cuda/%: tests/cuda/%.c tests/test.h $(BUILD)/libllmchat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libllmchat.a $(LDLIBS)

# The suites that run on the GPU again, built without sanitizers (ASan's shadow
# memory and the CUDA driver do not always agree, and the GPU check is timed).
GPU_TESTS := test_engine test_engine_beam test_engine_spec test_embed test_model
GPU_TEST_BIN := $(GPU_TESTS:%=$(BUILD)/gpu/tests/%)
$(BUILD)/gpu/tests/%: tests/%.c tests/test.h tests/engine_util.h tests/engine_beam_ref.h $(BUILD)/libllmchat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libllmchat.a $(LDLIBS)

test-cuda: $(BUILD)/llmchat $(BUILD)/tests/cuda/test_cuda_parity $(GPU_TEST_BIN)
	@BUILD=$(BUILD) GPU_TEST_DIR=$(BUILD)/gpu/tests sh tests/run_cuda.sh

# ARM64: the kernels (no other library needed) and their tests, cross-built with
# Debian's gcc-aarch64-linux-gnu and run under qemu-aarch64 (qemu-user); static
# binaries, so qemu needs no aarch64 root. Not part of `make test` (emulation is slow).
# (Test programs at -O1: Debian 12's cross gcc 12 crashes vectorizing test_quant.c.)
ARM_CC    ?= aarch64-linux-gnu-gcc
ARM_BUILD := $(BUILD)/arm64
ARM_TESTS := test_quant test_matmul test_elementwise test_attention test_pool
ARM_KSRC  := $(wildcard kernels/*.c kernels/cpu/*.c)
ARM_KOBJ  := $(ARM_KSRC:%.c=$(ARM_BUILD)/obj/%.o)
ARM_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -O2 -g -I. -pthread

$(ARM_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -MMD -MP -c -o $@ $<

$(ARM_BUILD)/tests/%: tests/%.c tests/test.h $(ARM_KOBJ)
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -O1 -static -o $@ $< $(ARM_KOBJ) -lm
.SECONDARY: $(ARM_KOBJ)

# (Emulated test_matmul takes minutes on a quiet machine: a longer limit per test.)
test-arm: $(ARM_TESTS:%=$(ARM_BUILD)/tests/%)
	@LLC_TEST_TIMEOUT=$${LLC_TEST_TIMEOUT:-2400} LLC_NO_CLI=1 LLC_NO_SIMD_RERUN=1 \
	    LLC_RUN_PREFIX=qemu-aarch64 sh tests/run.sh $^

# Debian packages the build needs (sudo only when not root).
deps:
	@sh .ci/install-deps

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
