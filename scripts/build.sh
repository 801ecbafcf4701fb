#!/usr/bin/env bash
# Configures and builds dsinfer into ${BUILD_DIR:-build} (Release; pass -DDSINFER_SANITIZE=ON etc.).
# TARGETS="dsinfer ..." builds only those (scripts/demo.sh: the binary, not the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ccache, where installed, makes rebuilds in several build folders cheap; CI runs without it.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "${launcher[@]}" "$@" >/dev/null
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
