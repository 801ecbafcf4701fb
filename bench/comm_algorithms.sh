#!/usr/bin/env bash
# All_reduce algorithms of both backends, per vector length, at 2 and 4 local ranks: gloo's ring,
# bcube, halving-doubling and chunked ring (DSINFER_GLOO_ALLREDUCE) and Open MPI's tuned
# algorithms (OMPI_MCA_coll_tuned_allreduce_algorithm 1-6; 0 = its own per-size decision), each a
# `dsinfer run -n N bench-comm` run, alternating over the algorithms for ROUNDS rounds (the host's
# speed moves between runs). Prints, per world size, one table: the median microseconds per call
# as min-max over the rounds.
#
#   bash bench/comm_algorithms.sh            (ROUNDS=3, WORLDS="2 4", DSINFER=build/dsinfer)
#
# Lengths: a decode step's all_reduce at batch 1 and 4 (7168, 4 x 7168 floats of V3) and a prefill
# chunk of 64 and 512 tokens (64 x 7168, 512 x 7168). Override with FLOATS=a,b,c.
set -euo pipefail
cd "$(dirname "$0")/.."
DSINFER=${DSINFER:-build/dsinfer}
ROUNDS=${ROUNDS:-3}
WORLDS=${WORLDS:-2 4}
FLOATS=${FLOATS:-7168,28672,458752,3670016}
ITERS=${ITERS:-200}
[ -x "$DSINFER" ] || { echo "error: no dsinfer binary at $DSINFER (scripts/build.sh)" >&2; exit 1; }

gloo_algorithms="ring bcube halving-doubling ring-chunked auto"
mpi_algorithms="0 1 2 3 4 5 6"
mpi_names=(default basic_linear nonoverlapping recursive_doubling ring segmented_ring rabenseifner)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# one bench-comm run (backend, then its environment); appends "length median" lines to $out/<world>-<label>
run_one() {
  local world=$1 label=$2 comm=$3
  shift 3
  env "$@" timeout 600 "$DSINFER" --threads 1 run -n "$world" --comm "$comm" bench-comm --iters "$ITERS" --warmup 20 \
    --floats "$FLOATS" --gather-floats 8 2>"$out/err" |
    awk '/^all_reduce_sum/ { print $2, $5 }' >>"$out/$world-$label" ||
    { echo "error: $label at $world ranks failed:" >&2; cat "$out/err" >&2; exit 1; }
}

for world in $WORLDS; do
  for ((round = 1; round <= ROUNDS; ++round)); do
    echo "world $world, round $round of $ROUNDS" >&2
    for a in $gloo_algorithms; do run_one "$world" "gloo-$a" gloo DSINFER_GLOO_ALLREDUCE="$a"; done
    for a in $mpi_algorithms; do
      run_one "$world" "mpi-${mpi_names[$a]}" mpi OMPI_MCA_coll_tuned_use_dynamic_rules=1 \
        OMPI_MCA_coll_tuned_allreduce_algorithm="$a"
    done
  done
done

for world in $WORLDS; do
  echo
  echo "all_reduce_sum at $world ranks: median us per call, min-max over $ROUNDS rounds ($(lscpu | sed -n 's/^Model name: *//p'))"
  printf '%-26s' "algorithm \\ floats"
  IFS=, read -ra lengths <<<"$FLOATS"
  for n in "${lengths[@]}"; do printf '%20s' "$n"; done
  echo
  for f in "$out/$world"-*; do
    label=${f##*/$world-}
    printf '%-26s' "$label"
    for n in "${lengths[@]}"; do
      awk -v n="$n" '$1 == n { v[++k] = $2 } END {
        if (!k) { printf "%20s", "-"; exit }
        lo = hi = v[1]; for (i = 2; i <= k; ++i) { if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
        printf "%20s", sprintf("%.0f-%.0f", lo, hi) }' "$f"
    done
    echo
  done
done
