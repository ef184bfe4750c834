#!/bin/sh
# run_cuda.sh — `make test-cuda`: the CUDA backend on a GPU machine. The parity
# tests (every op and whole-model logits against the CPU backend, recorded steps
# against plain ones), then on the GPU backend (LLC_TEST_DEVICE=cuda) the greedy
# references (test_model) and the engine's batching, prefix-cache, fork/COW, beam,
# speculative and embeddings tests, then the parity tests again under
# compute-sanitizer (memcheck) when it is installed (LLC_CUDA_MEMCHECK=0 skips it).
# Ends with "N passed, N failed" like make test, and exits non-zero when anything
# failed: a failed test, a sanitizer report, or no GPU at all (a CUDA run that
# silently fell back to the CPU would prove nothing).
BUILD=${BUILD:-build}
GPU_TEST_DIR=${GPU_TEST_DIR:-$BUILD/gpu/tests}
export LLC_TEST_DEVICE=cuda
export LLC_NO_SIMD_RERUN=1 # the SIMD level is the CPU's business
status=0

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "run_cuda.sh: no NVIDIA GPU visible (nvidia-smi -L failed): nothing was tested"
    echo "0 passed, 1 failed"
    exit 1
fi
nvidia-smi -L

LLC_NO_CLI=1 sh tests/run.sh "$BUILD/tests/cuda/test_cuda_parity" "$GPU_TEST_DIR/test_model" \
    "$GPU_TEST_DIR/test_engine" "$GPU_TEST_DIR/test_engine_beam" "$GPU_TEST_DIR/test_engine_spec" \
    "$GPU_TEST_DIR/test_embed" >"$BUILD/cuda-tests.log" 2>&1
[ $? -eq 0 ] || status=1
cat "$BUILD/cuda-tests.log"
summary=$(tail -n 1 "$BUILD/cuda-tests.log")
pass=$(echo "$summary" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\1/p')
fail=$(echo "$summary" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\2/p')
[ -n "$pass" ] || { pass=0; fail=1; status=1; }

SAN=""
if command -v compute-sanitizer >/dev/null 2>&1; then SAN=compute-sanitizer
elif [ -x /usr/local/cuda/bin/compute-sanitizer ]; then SAN=/usr/local/cuda/bin/compute-sanitizer; fi
if [ "${LLC_CUDA_MEMCHECK:-1}" = 0 ]; then
    echo "(memcheck skipped: LLC_CUDA_MEMCHECK=0)"
elif [ -n "$SAN" ]; then
    echo "== compute-sanitizer memcheck: test_cuda_parity"
    if timeout -k 5 "${LLC_MEMCHECK_TIMEOUT:-300}" "$SAN" --tool memcheck --error-exitcode 9 \
            "$BUILD/tests/cuda/test_cuda_parity" >"$BUILD/cuda-memcheck.log" 2>&1; then
        pass=$((pass + 1))
        echo "ok   memcheck clean"
    else
        fail=$((fail + 1))
        status=1
        tail -n 40 "$BUILD/cuda-memcheck.log"
        echo "FAIL memcheck (full log: $BUILD/cuda-memcheck.log)"
    fi
else
    echo "(compute-sanitizer not found: memcheck skipped)"
fi
echo "$pass passed, $fail failed"
exit $status
