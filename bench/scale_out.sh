#!/usr/bin/env bash
# Decode over networks we do not have, emulated: 2 and 4 ranks (1 thread each) split over two
# network namespaces ("machines", tests/two_host.sh) joined by a TUN relay that delays every
# packet (build/net_delay: this kernel has no netem) with an htb rate limit on both ends, against
# the same slice on 1 rank. Each configuration's round trip is measured first (ping across the
# relay), so the table shows the delay the ranks really saw. Runs alternate over the
# configurations for ROUNDS rounds (the host's speed moves between runs); each cell is min-max.
#
#   bash bench/scale_out.sh          (root; exit 77 = skipped when not root)
#
# Environment: PARTS ("decode comm": the decode runs, the bare collectives), MP1 MP2 MP4 (the bench slice converted at mp1/2/4; bench/README.md), DSINFER,
# ROUNDS (2), DELAYS ("0 20 50 100", one-way us, at RATE), RATE (25gbit), RATES ("10gbit 100gbit",
# at 50 us), WORLDS ("2 4"), BACKEND (gloo: the torchrun-style launch across machines; mpi: mpirun
# with a hostfile, its daemon in the second namespace started through tests/netns_rsh.sh), OUT (a
# directory that keeps every run's JSON). Prints the tables; the raw rows go to $OUT/rows.tsv and $OUT/comm.tsv
# (scripts/scale_model.py OUT fits the cost model to them and projects 2 x 8).
set -uo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)" >&2; exit 77; }
command -v ping >/dev/null || { echo "error: no ping (scripts/install-deps.sh --peer)" >&2; exit 1; }
DSINFER=${DSINFER:-build/dsinfer}
MP1=${MP1:-/work/bench-slice/mp1}
MP2=${MP2:-/work/bench-slice/mp2}
MP4=${MP4:-/work/bench-slice/mp4}
ROUNDS=${ROUNDS:-2}
DELAYS=${DELAYS-0 20 50 100}
RATE=${RATE:-25gbit}
RATES=${RATES-10gbit 100gbit}
WORLDS=${WORLDS:-2 4}
BACKEND=${BACKEND:-gloo}
case "$BACKEND" in
  gloo) LAUNCHER=direct ;;
  mpi) LAUNCHER=mpirun ;;
  *) echo "error: BACKEND must be gloo or mpi, got '$BACKEND'" >&2; exit 1 ;;
esac
export LAUNCHER
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
for w in $WORLDS; do
  dir_var=MP$w
  [ -f "${!dir_var}/config.json" ] || { echo "error: no slice at mp$w in ${!dir_var} (bench/README.md)" >&2; exit 1; }
done
[ -x build/net_delay ] || { echo "error: no build/net_delay (scripts/build.sh)" >&2; exit 1; }

# short ceilings: the decode step is what this measures
BENCH_ARGS="bench --batch 1 --prefill 64 --serving 0 --decode-steps 16 --warmup-steps 4 --runs 2 --bw-mb 256 --passes 1 --fma-iterations 2000000 --json"

# configurations: "world delay_us rate" (world 1: one process, its thread count as rate "x1"/"x2")
configs=("1 - x2" "1 - x1")
for w in $WORLDS; do
  configs+=("$w loopback -")
  for d in $DELAYS; do configs+=("$w $d $RATE"); done
  for r in $RATES; do configs+=("$w 50 $r"); done
done

# the average round trip two_host.sh's ping printed into stderr file $1 (ms)
ping_rtt() { sed -n 's|.*rtt min/avg/max/mdev = [0-9.]*/\([0-9.]*\)/.*|\1|p' "$1" | head -1; }

rows=$OUT/rows.tsv
: >"$rows"
run_config() {
  local world=$1 delay=$2 rate=$3 tag=$4
  local json=$OUT/$tag.json err=$OUT/$tag.err rtt=-
  case "$delay" in
    -) "$DSINFER" --threads "${rate#x}" $BENCH_ARGS --ckpt-path "$MP1" >"$json" 2>"$err" ;;
    loopback) "$DSINFER" --threads 1 run -n "$world" --comm "$BACKEND" $BENCH_ARGS --ckpt-path "$(eval echo \$MP$world)" \
      >"$json" 2>"$err" ;;
    *)
      RANKS_PER_HOST=$((world / 2)) TWO_HOST_DELAY_US=$delay TWO_HOST_RATE=$rate TWO_HOST_PING=50 \
        TWO_HOST_RELAY_REPORT=1 TWO_HOST_TIMEOUT=900 \
        bash tests/two_host.sh "$DSINFER" $BENCH_ARGS --ckpt-path "$(eval echo \$MP$world)" >"$json" 2>"$err"
      rtt=$(ping_rtt "$err")
      ;;
  esac
  local status=$?
  [ $status = 0 ] || { echo "error: $tag failed ($status), see $err:" >&2; tail -5 "$err" >&2; return 1; }
  python3 - "$json" "$world" "$delay" "$rate" "${rtt:--}" >>"$rows" <<'EOF'
import json, sys
path, world, delay, rate, rtt = sys.argv[1:]
d = json.load(open(path))["decode"][0]
c = d["collectives_rank0"]
coll_ms = 1e3 * (c["all_reduce"]["seconds"] + c["all_gather"]["seconds"])
calls = c["all_reduce"]["calls"] + c["all_gather"]["calls"]
print(f"{world}\t{delay}\t{rate}\t{rtt}\t{d['tokens_per_s']:.3f}\t{d['ms_per_step']:.2f}\t{coll_ms:.2f}\t{calls:.0f}")
EOF
}

# The collectives alone over the relay at 2 ranks, without delay and with COMM_DELAY: a decode
# all_reduce's latency (the software's cost per call) and how it grows with the delay (one-way
# trips per call): scripts/scale_model.py's alpha and trips. Rows to $OUT/comm.tsv.
COMM_DELAY=${COMM_DELAY:-100}
comm=$OUT/comm.tsv
: >"$comm"
run_comm() {
  local delay=$1 tag=$2
  RANKS_PER_HOST=1 TWO_HOST_DELAY_US=$delay TWO_HOST_RATE=$RATE TWO_HOST_PING=50 \
    bash tests/two_host.sh "$DSINFER" bench-comm --iters 1000 --warmup 50 --floats 7168 >"$OUT/$tag.out" 2>"$OUT/$tag.err" ||
    { echo "error: $tag failed, see $OUT/$tag.err" >&2; return 1; }
  local rtt us
  rtt=$(ping_rtt "$OUT/$tag.err")
  us=$(awk '/^all_reduce_sum/ { print $5 }' "$OUT/$tag.out")
  printf '2\t%s\t%s\t%s\t%s\n' "$delay" "$RATE" "$rtt" "$us" >>"$comm"
}

PARTS=${PARTS:-decode comm}
for ((round = 1; round <= ROUNDS; ++round)); do
  if [[ " $PARTS " == *" decode "* ]]; then
    for i in "${!configs[@]}"; do
      read -r world delay rate <<<"${configs[$i]}"
      echo "round $round of $ROUNDS: world $world, delay $delay, rate $rate" >&2
      run_config "$world" "$delay" "$rate" "r$round-c$i" || exit 1
    done
  fi
  if [[ " $PARTS " == *" comm "* ]]; then
    for delay in 0 "$COMM_DELAY"; do
      echo "round $round of $ROUNDS: bench-comm at 2 ranks, delay $delay" >&2
      run_comm "$delay" "r$round-comm$delay" || exit 1
    done
  fi
done
if [ -s "$comm" ]; then
  echo "bench-comm over the relay, 2 ranks, all_reduce of 7168 floats (median us per call; ping rtt ms):"
  sort -n -k2 "$comm" | awk -F'\t' '{ printf "  one-way delay %4s us: ping rtt %s ms, all_reduce %s us\n", $2, $4, $5 }'
fi
[ -s "$rows" ] || exit 0

echo "decode batch 1 on the slice, $BACKEND, $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $ROUNDS rounds (min-max), $(date -u +%F)"
python3 - "$rows" <<'EOF'
import sys
from collections import OrderedDict
rows = OrderedDict()
for line in open(sys.argv[1]):
    world, delay, rate, rtt, tps, ms, coll, calls = line.rstrip("\n").split("\t")
    rows.setdefault((world, delay, rate), []).append((rtt, float(tps), float(ms), float(coll), calls))
def span(vals, fmt):
    lo, hi = min(vals), max(vals)
    return (fmt % lo) if fmt % lo == fmt % hi else (fmt % lo) + "-" + (fmt % hi)
base = max(r[1] for r in rows.get(("1", "-", "x2"), [(None, 0, 0, 0, 0)]))
print(f"{'ranks':>5} {'one-way delay':>14} {'rate':>8} {'ping rtt us':>12} {'tok/s':>14} {'ms/step':>14} "
      f"{'collectives ms':>16} {'calls':>6} {'of 1x2 best':>12}")
for (world, delay, rate), rs in rows.items():
    rtts = [float(r[0]) * 1000 for r in rs if r[0] not in ("-", "")]
    rtt = span(rtts, "%.0f") if rtts else "-"
    where = {"-": "1 process", "loopback": "loopback"}.get(delay, delay + " us")
    rel = span([r[1] / base for r in rs], "%.2f") if base else "-"
    print(f"{world:>5} {where:>14} {rate:>8} {rtt:>12} {span([r[1] for r in rs], '%.2f'):>14} "
          f"{span([r[2] for r in rs], '%.1f'):>14} {span([r[3] for r in rs], '%.2f'):>16} {rs[0][4]:>6} {rel:>12}")
EOF
echo "raw rows and every run's JSON and stderr: $OUT" >&2
