#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (built by scripts/test-sanitized.sh with clang) for
# SECONDS each (default 60), as many at once as there are CPUs, each on a scratch copy of its
# committed seed corpus with its dictionary. Prints executions, coverage and corpus size per
# target; exits 1 on any finding (the input is kept as crash-*/timeout-*/leak-* in its work dir).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: fuzz_config, fuzz_jinja, ...; default all)
# A long run (tests/fuzz/README.md): scripts/fuzz.sh 3600 fuzz_jinja
# FUZZ_RUNS=N stops each target after N executions instead (SECONDS is then ignored):
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 0 fuzz_config
# FUZZ_TIMEOUT (seconds, default 10) is how long one input may run before it counts as a hang: raise
# it for runs beside other work (a starved process can take 10 s over an input that takes 1 s).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-${SAN_BUILD_DIR:-build-san}}
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$f" .cpp)
    [ "$name" = fuzz_support ] || targets+=("$name")
  done
fi
work="$BUILD_DIR/fuzz"
mkdir -p "$work"
run_one() {
  local target=$1 seconds=$2 build=$3 work=$4
  local corpus_name=${target#fuzz_}
  local dir="$work/$target"
  mkdir -p "$dir/corpus"
  cp -n tests/fuzz/corpus/"$corpus_name"/* "$dir/corpus/" 2>/dev/null || true
  local dict=tests/fuzz/dict/json.dict extra=()
  case $target in
    fuzz_jinja) dict=tests/fuzz/dict/jinja.dict ;;
    fuzz_tokenizer_encode) dict="" ;;
    fuzz_store) dict=tests/fuzz/dict/store.dict ;;
    # bodies up to a default --max-body: deep nesting needs room (a 250k-level body crashed serve)
    fuzz_request) extra=(-max_len=1048576) ;;
  esac
  local limit=(-max_total_time="$seconds")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
  local args=("${limit[@]}" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$dir/" "$dir/corpus")
  [ -n "$dict" ] && args=(-dict="$dict" "${args[@]}")
  args=("${extra[@]}" "${args[@]}")
  local started=$SECONDS
  if ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$build/tests/fuzz/$target" "${args[@]}" >"$dir/log" 2>&1; then
    local runs cov corpus
    runs=$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | tail -1 | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -a -o 'cov: [0-9]*' "$dir/log" | tail -1 | grep -o '[0-9]*' || echo "?")
    corpus=$(ls "$dir/corpus" | wc -l)
    printf '%-24s ok: %s executions in %ss, coverage %s edges, corpus %s\n' "$target" "$runs" "$((SECONDS - started))" "$cov" "$corpus"
  else
    if ! ls "$dir" | grep -q -E '^(crash|timeout|leak|oom|slow-unit)-'; then
      # no input to blame: the target did not run (a dictionary libFuzzer refused, a missing file)
      printf '%-24s FAILED TO RUN (%s/log):\n' "$target" "$dir" >&2
      tail -3 "$dir/log" >&2
      return 1
    fi
    printf '%-24s FINDING (see %s/log and the crash-* input there):\n' "$target" "$dir" >&2
    grep -a -E 'ERROR|fuzz finding|==[0-9]+==|SUMMARY|terminate|what\(\)' "$dir/log" | head -8 >&2
    return 1
  fi
}
export -f run_one
export FUZZ_RUNS FUZZ_TIMEOUT
for t in "${targets[@]}"; do
  [ -x "$BUILD_DIR/tests/fuzz/$t" ] || { echo "error: $BUILD_DIR/tests/fuzz/$t is not built (scripts/test-sanitized.sh)" >&2; exit 1; }
done
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run_one "$@"' _ {} "$seconds" "$BUILD_DIR" "$work"
