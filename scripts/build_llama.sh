#!/usr/bin/env bash
# Build and install llama-cpp-python (the embedded local model's server) so that it runs on
# any x86-64 machine, not only the one that compiled it.
#
# Why: pip's default build compiles llama.cpp with GGML_NATIVE (-march=native), which turns
# on every instruction set the CPU *advertises*. On a VM whose CPU advertises AMX or
# AVX-512 but whose hypervisor/OS does not grant that register state, the server dies with
# SIGSEGV/SIGILL on its first request (seen: `ldtilecfg` in ggml_backend_amx_mul_mat).
# So: no native build, no AMX, no AVX-512, and AVX/AVX2/FMA/F16C/BMI2 only when a small
# probe built with those flags actually executes them here (runtime proof, not cpuid).
#
# The wheel is built once per set of flags into ~/.cache/society-sim/wheels/<hash>/ and
# installed from there: pip's own wheel cache would reuse a wheel built with other flags.
#
# Usage: scripts/build_llama.sh PYTHON      (the venv's python; run by the Makefile)
#        scripts/build_llama.sh --flags     (print the CMake flags this machine gets)
set -euo pipefail

PY=${1:?usage: scripts/build_llama.sh PYTHON | --flags}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The version pin lives in one place: the local-llm extra in pyproject.toml.
PIN=$(grep -o 'llama-cpp-python\[server\]==[0-9.]*' "$ROOT/pyproject.toml" | sed 's/\[server\]//' || true)
if [ -z "$PIN" ]; then
    echo "build_llama.sh: no llama-cpp-python[server]==X pin in pyproject.toml" >&2
    exit 1
fi
VERSION=${PIN#*==}
# The sha256 of the sdist the wheel is built from: the lock's entry for the same pin (written by
# `make lock`). pip checks the download against it (--require-hashes) before building.
LOCK="$ROOT/requirements.lock"
HASHES=$(awk -v pin="$PIN" '
    index($0, pin " ") == 1 { grab = 1; next }
    grab && /^ +--hash=/ { gsub(/[ \\]/, ""); printf "%s ", $0; next }
    { grab = 0 }' "$LOCK" 2>/dev/null || true)
if [ -z "$HASHES" ]; then
    echo "build_llama.sh: no hashes for $PIN in requirements.lock (run: make lock)" >&2
    exit 1
fi

# Runtime proof that this machine (CPU *and* OS/VM) executes the AVX2-tier instructions.
# Compiled at -O0 from volatile inputs so every instruction is really emitted and run; an
# instruction the OS does not enable raises SIGILL and the probe fails.
probe_avx2() {
    local dir
    dir=$(mktemp -d)
    cat >"$dir/probe.c" <<'C'
#include <immintrin.h>
int main(void) {
    volatile float fin[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    volatile unsigned short hin[8] = {0x3c00, 0x4000, 0x4200, 0x4400, 0, 0, 0, 0};
    volatile unsigned int x = 12345;
    float f[8]; unsigned short h[8]; float out[8];
    for (int i = 0; i < 8; i++) { f[i] = fin[i]; h[i] = hin[i]; }
    __m256 a = _mm256_loadu_ps(f);                                    /* AVX (ymm state) */
    __m256 b = _mm256_fmadd_ps(a, a, a);                              /* FMA */
    __m256i c = _mm256_add_epi32(_mm256_castps_si256(b),
                                 _mm256_castps_si256(a));             /* AVX2 */
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));  /* F16C */
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_castsi256_ps(c), d));
    unsigned long long p = _pdep_u64(x, 0xff00ff00ULL);               /* BMI2 */
    unsigned int crc = _mm_crc32_u32(0, x);                           /* SSE4.2 */
    return (out[0] == 0.0f && p == 1 && crc == 2) ? 1 : 0;
}
C
    local ok=1
    if "${CC:-cc}" -O0 -msse4.2 -mavx -mavx2 -mfma -mf16c -mbmi2 "$dir/probe.c" \
        -o "$dir/probe" 2>/dev/null && "$dir/probe" 2>/dev/null; then
        ok=0
    fi
    rm -rf "$dir"
    return $ok
}

# All CMake options below are llama.cpp's (vendor/llama.cpp/ggml/CMakeLists.txt in the sdist).
ARGS=(
    -DGGML_NATIVE=OFF        # no -march=native: it enables what the CPU advertises, not what works
    -DGGML_AMX_TILE=OFF      # AMX needs tile state the OS/hypervisor must grant (the ldtilecfg SIGSEGV)
    -DGGML_AMX_INT8=OFF
    -DGGML_AMX_BF16=OFF
    -DGGML_AVX512=OFF        # AVX-512 (zmm) needs OS-enabled state and is absent on many CPUs
    -DGGML_AVX512_VBMI=OFF
    -DGGML_AVX512_VNNI=OFF
    -DGGML_AVX512_BF16=OFF
    -DGGML_AVX_VNNI=OFF      # not part of the probe below
)
if [ "$(uname -m)" = x86_64 ]; then
    if probe_avx2; then
        TIER=avx2
        # Proven to execute here by probe_avx2 (every AVX2 CPU since 2013 also has these).
        ARGS+=(-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
    else
        TIER=baseline
        # Baseline x86-64 (SSE2 only): slower, but runs anywhere.
        ARGS+=(-DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF)
    fi
else
    TIER=default  # other architectures: the compiler's baseline for the target (no native)
fi
CMAKE_ARGS="${ARGS[*]}"
if [ "$PY" = --flags ]; then
    echo "$CMAKE_ARGS"
    exit 0
fi
# The cache key: everything that changes the binary (CFLAGS too: CMake reads them).
KEY=$(printf '%s\n' "$PIN" "$(uname -m)" "$CMAKE_ARGS" "${CFLAGS:-}" "${CXXFLAGS:-}" |
    "$PY" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])')
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/society-sim/wheels/$KEY"

echo "llama.cpp build: $PIN, tier $TIER, CMAKE_ARGS=$CMAKE_ARGS"
if ! ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
    echo "building the wheel into $DIR (about 7 minutes on 2 cores)"
    rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp"
    printf '%s %s\n' "$PIN" "$HASHES" >"$DIR.tmp/requirement.txt"
    CMAKE_ARGS="$CMAKE_ARGS" "$PY" -m pip wheel --quiet --no-deps --no-cache-dir --require-hashes \
        --no-binary llama-cpp-python --wheel-dir "$DIR.tmp" -r "$DIR.tmp/requirement.txt"
    printf '%s\n' "$CMAKE_ARGS" >"$DIR.tmp/cmake_args.txt"
    rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"   # only a finished build becomes the cache entry
fi
# --force-reinstall: replace a llama-cpp-python built earlier with other (native) flags.
"$PY" -m pip install --quiet --no-deps --force-reinstall "$DIR"/llama_cpp_python-"$VERSION"-*.whl
