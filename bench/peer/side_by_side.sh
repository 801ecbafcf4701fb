#!/usr/bin/env bash
# dsinfer and the peer (ik_llama.cpp) on the bench slice in one run, alternating (dsinfer exact,
# peer, dsinfer fast, peer, dsinfer int8 mode, ... for ROUNDS rounds: the host's bandwidth moves from minute to
# minute, so each engine sees the same spread of it), same thread count, then one table: the
# ceilings dsinfer measured, and per engine the range over the rounds of decode batch 1 (and 4)
# tokens/s, GB/s and fraction of the read ceiling, prefill 64 and 512 tokens/s and GFLOP/s.
# The peer runs the slice as Q8_0 with its head in bf16 (the same head bytes as dsinfer's), with
# the CPU options its docs suggest (-rtr 1; defaults -mla 3 -fa 1 -fmoe 1).
# Usage: bash bench/peer/side_by_side.sh [workdir]   (default /work/peer; the peer is built and its
#        GGUFs written there once, see peer_setup.sh)
# Env: MP1=/work/bench-slice/mp1 (the slice converted at mp1) HF=/work/bench-slice/hf
#      DSINFER=build/dsinfer THREADS=2 ROUNDS=3 PEER_ARGS="-rtr 1" MIRROR=... PY=/usr/bin/python3
set -euo pipefail
W=${1:-/work/peer}
source "$(dirname "$0")/peer_setup.sh"
side_by_side_setup
peer_setup llama-bench llama-quantize
OUT=$W/side-by-side-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "results in $OUT" >&2
ds_run() {  # mode round
  local flags=()
  [ "$1" = fast ] && flags=(--fast)
  [ "$1" = int8 ] && flags=(--act-dtype int8)
  echo "round $2: dsinfer $1" >&2
  "$DSINFER" --threads "$THREADS" "${flags[@]}" bench --ckpt-path "$MP1" --json --serving 0 --runs 1 \
    --passes 2 >"$OUT/dsinfer-$1-$2.json" 2>"$OUT/dsinfer-$1-$2.log"
}
peer_run() {  # round
  echo "round $1: ik_llama.cpp" >&2
  # shellcheck disable=SC2086
  "$IK/build/bin/llama-bench" -m "$GGUF16" -t "$THREADS" -p 64,512 -n 16 -r 1 $PEER_ARGS -o json \
    >"$OUT/peer-$1.json" 2>"$OUT/peer-$1.log"
}
for round in $(seq "$ROUNDS"); do
  ds_run exact "$round"
  peer_run "$round-a"
  ds_run fast "$round"
  peer_run "$round-b"
  ds_run int8 "$round"  # int8 activations against the peer's Q8_0 x Q8_K: the same weight bytes
done
"$PY" - "$OUT" "$(git -C "$IK" rev-parse --short HEAD)" "$PEER_ARGS" "$THREADS" <<'PYEOF'
import glob, json, os, sys
out, peer_commit, peer_args, threads = sys.argv[1:5]
rounds = len(glob.glob(os.path.join(out, "dsinfer-exact-*.json")))
def load(name):
    return json.load(open(os.path.join(out, name)))
exact = [load(f"dsinfer-exact-{i}.json") for i in range(1, rounds + 1)]
fast = [load(f"dsinfer-fast-{i}.json") for i in range(1, rounds + 1)]
int8 = [load(f"dsinfer-int8-{i}.json") for i in range(1, rounds + 1)]
# each peer run with the read ceiling of the dsinfer runs on either side of it
peer, peer_read = [], []
for i in range(1, rounds + 1):
    for part, (before, after) in (("a", (exact, fast)), ("b", (fast, exact))):
        peer.append(load(f"peer-{i}-{part}.json"))
        nxt = after[i - 1] if part == "a" else (after[i] if i < rounds else None)
        near = [before[i - 1]["ceilings"]["read_gbps"]] + ([nxt["ceilings"]["read_gbps"]] if nxt else [])
        peer_read.append(sum(near) / len(near))
def span(values, fmt="{:.1f}"):
    values = [v for v in values if v is not None]
    if not values: return "-"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "-" + fmt.format(hi)
def decode(runs, batch, key):
    return [next(d[key] for d in r["decode"] if d["batch"] == batch) for r in runs]
def prefill(runs, tokens, key):
    return [next(p[key] for p in r["prefill"] if p["tokens"] == tokens) for r in runs]
ceil = [r["ceilings"] for r in exact + fast + int8]
print(f"dsinfer and ik_llama.cpp {peer_commit} ({peer_args}) on the bench slice, {threads} threads, "
      f"{len(exact)} rounds alternating")
print(f"ceilings (dsinfer's, each run):  read {span([c['read_gbps'] for c in ceil])} GB/s, "
      f"fp32 FMA {span([c['fma_f32_gflops'] for c in ceil], '{:.0f}')} GFLOP/s, "
      f"bf16 dot {span([c['bf16_dot_gflops'] for c in ceil], '{:.0f}')} GFLOP/s, "
      f"AMX {span([c['amx_bf16_gflops'] for c in ceil], '{:.0f}')} GFLOP/s, "
      f"int8 dot {span([c['int8_dot_gops'] for c in ceil], '{:.0f}')} GOP/s")
# the peer's bytes per token: dsinfer's, with its fp8 matrices (1 byte + block scales) as Q8_0
# (34 bytes per 32 weights); the bf16 head and norms as they are
def peer_bytes(run):
    d = next(d for d in run["decode"] if d["batch"] == 1)
    head = next(p["weight_bytes"] for p in d["parts_rank0"] if p["part"] == "head")
    return head + (d["weight_bytes_per_token"] - head) * (34 / 32)
bytes_peer = peer_bytes(exact[0]) if exact else None
def peer_ts(n_prompt, n_gen):
    return [e["avg_ts"] for r in peer for e in r if e["n_prompt"] == n_prompt and e["n_gen"] == n_gen]
def peer_fraction():  # per run: its decode GB/s over the read ceiling measured around it
    return [e["avg_ts"] * bytes_peer / 1e9 / read for r, read in zip(peer, peer_read)
            for e in r if e["n_prompt"] == 0 and e["n_gen"] == 16]
rows = []
for name, runs in (("dsinfer exact", exact), ("dsinfer --fast", fast),
                   ("dsinfer --act-dtype int8", int8)):
    fr = "fma_f32_gflops" if name == "dsinfer exact" else runs[0]["prefill_ceiling"] if runs else None
    rows.append((name,
                 f"{span(decode(runs, 1, 'tokens_per_s'), '{:.2f}')} tok/s, {span(decode(runs, 1, 'gbps'))} GB/s, "
                 f"{span(decode(runs, 1, 'bw_fraction'), '{:.2f}')}",
                 f"{span(decode(runs, 4, 'tokens_per_s'), '{:.1f}')} tok/s, {span(decode(runs, 4, 'bw_fraction'), '{:.2f}')}",
                 f"{span(prefill(runs, 64, 'tokens_per_s'))} tok/s",
                 f"{span(prefill(runs, 512, 'tokens_per_s'))} tok/s, {span(prefill(runs, 512, 'gflops'), '{:.0f}')} GFLOP/s, "
                 f"{span(prefill(runs, 512, 'flop_fraction'), '{:.2f}')} of {fr}"))
tg = peer_ts(0, 16)
gbps = [t * bytes_peer / 1e9 for t in tg] if bytes_peer else []
rows.append((f"ik_llama.cpp Q8_0, bf16 head ({bytes_peer / 1e9:.2f} GB/token)" if bytes_peer else "ik_llama.cpp",
             f"{span(tg, '{:.2f}')} tok/s, {span(gbps)} GB/s, {span(peer_fraction() if bytes_peer else [], '{:.2f}')}",
             "-", f"{span(peer_ts(64, 0))} tok/s", f"{span(peer_ts(512, 0))} tok/s"))
print()
print("| | decode batch 1 (tok/s, GB/s, of read) | decode batch 4 | prefill 64 | prefill 512 |")
print("|---|---|---|---|---|")
for r in rows: print("| " + " | ".join(r) + " |")
PYEOF
