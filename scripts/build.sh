#!/usr/bin/env bash
# Configures and builds dsinfer into ${BUILD_DIR:-build} (Release; pass -DDSINFER_SANITIZE=ON etc.).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
