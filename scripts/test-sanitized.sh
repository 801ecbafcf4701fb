#!/usr/bin/env bash
# The sanitizer suite (part of the README's test command): builds dsinfer and its tests again in
# ${SAN_BUILD_DIR:-build-san} with AddressSanitizer + UndefinedBehaviorSanitizer and runs the
# unit and multi-process tests there (the golden tests are the Release build's: same code, 10x the
# arithmetic). With clang (scripts/install-deps.sh --fuzz) that build also has the libFuzzer
# targets, and each gets a short run (FUZZ_SECONDS, default 60; 0 skips). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
export SAN_BUILD_DIR=${SAN_BUILD_DIR:-build-san}
fuzz=OFF
compilers=()
line_tables=-g1  # gcc's name for line tables only
if command -v clang++ >/dev/null; then
  fuzz=ON
  compilers=(-DCMAKE_CXX_COMPILER=clang++)
  line_tables=-gline-tables-only
fi
# -O1 with line tables only: cheaper to compile than -O2 -g, stack traces still have file:line
BUILD_DIR=$SAN_BUILD_DIR BUILD_TYPE=RelWithDebInfo scripts/build.sh "${compilers[@]}" -DDSINFER_SANITIZE=ON \
  -DDSINFER_FUZZ=$fuzz -DDSINFER_GOLDEN_TESTS=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 $line_tables -DNDEBUG"
# handle_sigbus=0: SIGBUS is dsinfer's own (io/mapped_file.cpp names the changed file)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0:handle_sigbus=0
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Left out here (they run in the Release suite): four tests that are all arithmetic, the same code
# as smaller tests here at 10-100x the work, ~8 of the suite's ~25 minutes under ASan on 2 cores.
# (Linear.EveryIsaMatchesDoubleReference stays, slow as it is: it runs every kernel on odd shapes.)
heavy="EngineMtp.GreedyAndSampledTokensAndLogitsAreThoseWithoutIt|EngineMtp.ContinuousBatchingChunkedPrefillAndACancelChangeNothing"
heavy+="|BenchCommand.GoldenComparesFastModeWithTheDemosBf16Run|BenchCommand.PrintsTheFractionsLine"
ctest --test-dir "$SAN_BUILD_DIR" --output-on-failure -j "$(nproc)" -L "unit|process" -E "$heavy" --timeout 900 "$@"
if [ "$fuzz" = ON ] && [ "${FUZZ_SECONDS:-60}" != 0 ]; then
  BUILD_DIR=$SAN_BUILD_DIR scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
elif [ "$fuzz" = ON ]; then
  echo "fuzzers: skipped (FUZZ_SECONDS=0)" >&2
else
  echo "fuzzers: skipped (no clang: scripts/install-deps.sh --fuzz installs it)" >&2
fi
