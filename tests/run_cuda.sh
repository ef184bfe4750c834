#!/bin/sh
# run_cuda.sh — `make test-cuda`: the CUDA backend on a GPU machine. The parity
# tests (every op and whole-model logits against the CPU backend), then the
# engine's batching, prefix-cache, fork/COW, beam and speculative tests on the GPU
# backend (LLC_TEST_DEVICE=cuda), under compute-sanitizer when it is installed.
# Ends with "N passed, N failed" like make test.
BUILD=${BUILD:-build}
export LLC_TEST_DEVICE=cuda
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 # ASan beside the CUDA driver
SAN=""
if command -v compute-sanitizer >/dev/null 2>&1; then SAN="compute-sanitizer --tool memcheck --error-exitcode 9"
elif [ -x /usr/local/cuda/bin/compute-sanitizer ]; then SAN="/usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9"; fi
LLC_NO_CLI=1 sh tests/run.sh "$BUILD/tests/cuda/test_cuda_parity" "$BUILD/tests/test_engine" \
    "$BUILD/tests/test_engine_beam" "$BUILD/tests/test_engine_spec"
if [ -n "$SAN" ]; then
    echo "== compute-sanitizer memcheck: parity tests"
    $SAN "$BUILD/tests/cuda/test_cuda_parity" | tail -3
fi
