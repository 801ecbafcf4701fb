#!/usr/bin/env bash
# Decode at depth, dsinfer and the peer (ik_llama.cpp) on the bench slice, alternating (dsinfer
# fast, peer, dsinfer fast with a bf16 cache, dsinfer exact, peer, ... for ROUNDS rounds), same thread count: tokens/s of decode
# batch 1 after DEPTHS cached positions. dsinfer: `bench --depth` (the cache filled with synthetic
# entries, bench/README.md); the peer: llama-bench -gp D,16 (prefills D tokens, then times 16
# generated), its defaults -mla 3 -fa 1 -fmoe 1 plus PEER_ARGS, the slice as Q8_0 with a bf16 head.
# Usage: bash bench/peer/depth_side_by_side.sh [workdir]   (default /work/peer; see peer_setup.sh)
# Env: DEPTHS="4096 16384" ROUNDS=2 THREADS=2 MP1=/work/bench-slice/mp1 DSINFER=build/dsinfer
#      PEER_ARGS="-rtr 1"
set -euo pipefail
W=${1:-/work/peer}
source "$(dirname "$0")/peer_setup.sh"
side_by_side_setup
ROUNDS=${ROUNDS:-2}
DEPTHS=${DEPTHS:-4096 16384}
peer_setup llama-bench llama-quantize
OUT=$W/depth-side-by-side-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "results in $OUT" >&2
max_depth=0
for d in $DEPTHS; do [ "$d" -gt "$max_depth" ] && max_depth=$d; done
ds_run() {  # mode (fast, fast-bf16, exact) round
  local flags=() cache=()
  [ "$1" != exact ] && flags=(--fast)
  [ "$1" = fast ] && cache=(--kv-cache-dtype f32)  # (auto would be bf16 where the bf16 kernels run)
  [ "$1" = fast-bf16 ] && cache=(--kv-cache-dtype bf16)
  echo "round $2: dsinfer $1" >&2
  "$DSINFER" --threads "$THREADS" "${flags[@]}" bench "${cache[@]}" --ckpt-path "$MP1" --max-seq-len $((max_depth + 64)) --json \
    --serving 0 --runs 1 --passes 1 --batch 1 --prefill 8 --decode-steps 16 --warmup-steps 2 \
    --depth "$(echo $DEPTHS | tr ' ' ',')" >"$OUT/dsinfer-$1-$2.json" 2>"$OUT/dsinfer-$1-$2.log"
}
peer_run() {  # round
  echo "round $1: ik_llama.cpp" >&2
  local gp=()
  for d in $DEPTHS; do gp+=(-gp "$d,16"); done
  # shellcheck disable=SC2086
  "$IK/build/bin/llama-bench" -m "$GGUF16" -t "$THREADS" -p 0 -n 0 "${gp[@]}" -r 1 $PEER_ARGS -o json \
    >"$OUT/peer-$1.json" 2>"$OUT/peer-$1.log"
}
for round in $(seq "$ROUNDS"); do
  ds_run fast "$round"
  peer_run "$round-a"
  ds_run fast-bf16 "$round"
  ds_run exact "$round"
  peer_run "$round-b"
done
"$PY" - "$OUT" "$(git -C "$IK" rev-parse --short HEAD)" "$PEER_ARGS" "$THREADS" "$DEPTHS" <<'PYEOF'
import glob, json, os, sys
out, peer_commit, peer_args, threads, depths = sys.argv[1:6]
depths = [int(d) for d in depths.split()]
def load(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, pattern)))]
fast, exact, peer = load("dsinfer-fast-[0-9]*.json"), load("dsinfer-exact-*.json"), load("peer-*.json")
fast_bf16 = load("dsinfer-fast-bf16-*.json")
def span(values):
    values = [v for v in values if v is not None]
    if not values: return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"
def ds(runs, depth):
    return [next(d["tokens_per_s"] for d in r["depth"] if d["depth"] == depth and d["batch"] == 1) for r in runs]
def peer_ts(depth):
    # llama-bench's -gp D,16 entries: n_prompt D, n_gen 16; avg_ts is generated tokens per second
    return [e["avg_ts"] for r in peer for e in r if e["n_prompt"] == depth and e["n_gen"] == 16]
print(f"decode batch 1 at depth, tok/s: dsinfer and ik_llama.cpp {peer_commit} ({peer_args}), {threads} threads, "
      f"{len(fast)} rounds alternating")
print("| depth | dsinfer --fast | --fast, bf16 cache | dsinfer exact | ik_llama.cpp |")
print("|---|---|---|---|---|")
for d in [16] + depths:
    peer_col = span(peer_ts(d)) if d != 16 else "-"
    print(f"| {d} | {span(ds(fast, d))} | {span(ds(fast_bf16, d))} | {span(ds(exact, d))} | {peer_col} |")
PYEOF
