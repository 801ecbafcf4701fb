#!/usr/bin/env bash
# One or more dsinfer variants (binaries and / or flags) on the bench slice, alternating (A B A B
# ... for ROUNDS rounds: the host's bandwidth moves from minute to minute, so a single run of each
# says little), then one table per decode batch: per variant the range over the rounds of tokens/s,
# the read ceiling each run measured, each model part's milliseconds per step (rank 0) and the time
# outside the parts (sampling, the engine's bookkeeping). Keep the old binary as a copy
# (cp build/dsinfer /tmp/dsinfer-old) before rebuilding.
# Usage: bash bench/ab_decode.sh 'NAME=BINARY [FLAGS...]' 'NAME=BINARY [FLAGS...]' ...
#   e.g. bash bench/ab_decode.sh 'old=/tmp/dsinfer-old' 'new=build/dsinfer' 'new-fast=build/dsinfer --fast'
# Env: MP1=/work/bench-slice/mp1 (the slice converted at mp1) THREADS=2 ROUNDS=3 BATCHES="1 4 8"
#      STEPS=16 (timed decode steps per batch) OUT=/tmp/ab-decode-<time> PY=/usr/bin/python3
set -euo pipefail
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
if [ $# -lt 1 ]; then usage >&2; echo "error: no variant given" >&2; exit 2; fi
if [ "$1" = -h ] || [ "$1" = --help ]; then usage; exit 0; fi
MP1=${MP1:-/work/bench-slice/mp1}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-1 4 8}
STEPS=${STEPS:-16}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-/tmp/ab-decode-$(date +%Y%m%d-%H%M%S)}
[ -f "$MP1/config.json" ] || { echo "error: no converted slice at $MP1 (bench/README.md)" >&2; exit 1; }
names=()
for spec in "$@"; do
  name=${spec%%=*}
  command=${spec#*=}
  if [ "$name" = "$spec" ] || [ -z "$name" ] || [ -z "$command" ]; then
    echo "error: variant '$spec' is not NAME=BINARY [FLAGS...]" >&2
    exit 2
  fi
  [[ $name =~ ^[A-Za-z0-9._-]+$ ]] || { echo "error: variant name '$name': letters, digits, . _ - only" >&2; exit 2; }
  binary=${command%% *}
  [ -x "$binary" ] || { echo "error: variant '$name': no executable at $binary" >&2; exit 1; }
  for seen in "${names[@]}"; do
    [ "$seen" != "$name" ] || { echo "error: variant name '$name' given twice" >&2; exit 2; }
  done
  names+=("$name")
done
mkdir -p "$OUT"
echo "results in $OUT" >&2
for round in $(seq "$ROUNDS"); do
  for spec in "$@"; do
    name=${spec%%=*}
    read -r -a command <<<"${spec#*=}"
    echo "round $round: $name" >&2
    # shellcheck disable=SC2086
    if ! "${command[0]}" --threads "$THREADS" "${command[@]:1}" bench --ckpt-path "$MP1" --json --batch $BATCHES \
      --prefill 16 --decode-steps "$STEPS" --warmup-steps 2 --runs 2 --passes 1 --serving 0 \
      >"$OUT/$name-$round.json" 2>"$OUT/$name-$round.log"; then
      echo "error: variant '$name' failed in round $round; its log: $OUT/$name-$round.log" >&2
      exit 1
    fi
  done
done
"$PY" - "$OUT" "$ROUNDS" "${names[@]}" <<'PYEOF'
import json, os, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {n: [json.load(open(os.path.join(out, f"{n}-{r}.json"))) for r in range(1, rounds + 1)] for n in names}
def span(values, fmt="{:.1f}"):
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"
first = runs[names[0]][0]
batches = [d["batch"] for d in first["decode"]]
parts = [p["part"] for p in first["decode"][0]["parts_rank0"]]
print(f"decode on the bench slice, {rounds} rounds alternating; ranges over the rounds, ms per step (rank 0)")
for b in batches:
    print(f"\nbatch {b}")
    print("| variant | tok/s | read GB/s | " + " | ".join(parts) + " | outside the parts |")
    print("|---" * (len(parts) + 4) + "|")
    for n in names:
        steps = [next(d for d in j["decode"] if d["batch"] == b) for j in runs[n]]
        cells = [span([s["tokens_per_s"] for s in steps], "{:.2f}"), span([j["ceilings"]["read_gbps"] for j in runs[n]])]
        for part in parts:
            cells.append(span([1e3 * next(p["seconds"] for p in s["parts_rank0"] if p["part"] == part) for s in steps]))
        cells.append(span([s["ms_per_step"] - 1e3 * sum(p["seconds"] for p in s["parts_rank0"]) for s in steps], "{:.2f}"))
        print(f"| {n} | " + " | ".join(cells) + " |")
print("\nper round, tok/s at batch " + str(batches[0]) + ": " +
      "; ".join(", ".join(f"{n} {next(d for d in runs[n][r]['decode'] if d['batch'] == batches[0])['tokens_per_s']:.2f}"
                          for n in names) for r in range(rounds)))
PYEOF
