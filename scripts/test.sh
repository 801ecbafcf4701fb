#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs every test (unit and golden) with ctest.
# Extra arguments go to ctest (e.g. -L unit, -R Golden).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
