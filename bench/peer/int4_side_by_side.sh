#!/usr/bin/env bash
# Int4 routed experts against fp8 on the bench slice, and the peer (ik_llama.cpp) with the same
# mix, in one run, alternating (dsinfer fp8, dsinfer --experts-int4 in exact mode and in int8 mode
# (--act-dtype int8: int4 x int8 products), peer Q8_0, peer Q8_0 with Q4_0 experts, for ROUNDS
# rounds: the host's bandwidth moves from minute to minute), same thread count; then one table of decode batch 1 / 4 and prefill 64 / 512 ranges, dsinfer's
# weight bytes per token, and the speed ratios int4 / fp8 per round. The peer's Q4_0 (one fp16
# scale per 32 weights, 4.5 bits) is the nearest GGUF type to dsinfer's int4 (one per 128, 4.125).
# Usage: bash bench/peer/int4_side_by_side.sh [workdir]   (default /work/peer; see peer_setup.sh)
# Env: MP1=/work/bench-slice/mp1 MP1_INT4=/work/bench-slice/mp1-int4 (convert --experts-int4 of the
#      same HF slice) DSINFER=build/dsinfer THREADS=2 ROUNDS=3 PEER_ARGS="-rtr 1" PY=/usr/bin/python3
set -euo pipefail
W=${1:-/work/peer}
MP1_INT4=${MP1_INT4:-/work/bench-slice/mp1-int4}
source "$(dirname "$0")/peer_setup.sh"
side_by_side_setup
if [ ! -f "$MP1_INT4/config.json" ]; then
  echo "converting $HF with --experts-int4 into $MP1_INT4" >&2
  n_experts=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['n_routed_experts'])" "$HF/config.json")
  "$DSINFER" -q convert --hf-ckpt-path "$HF" --save-path "$MP1_INT4" --n-experts "$n_experts" --model-parallel 1 --experts-int4
fi
peer_setup llama-bench llama-quantize
GGUF_Q4=$W/slice-q4exps-q8_0-headbf16.gguf
if [ ! -f "$GGUF_Q4" ]; then
  "$IK/build/bin/llama-quantize" --allow-requantize --leave-output-tensor \
    --custom-q "ffn_gate_exps=q4_0,ffn_up_exps=q4_0,ffn_down_exps=q4_0" "$GGUF16" "$GGUF_Q4.tmp" Q8_0 2 >/dev/null 2>&1
  mv "$GGUF_Q4.tmp" "$GGUF_Q4"
fi
OUT=$W/int4-side-by-side-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "results in $OUT" >&2
ds_run() {  # name ckpt round [global flags]
  echo "round $3: dsinfer $1" >&2
  "$DSINFER" --threads "$THREADS" "${@:4}" bench --ckpt-path "$2" --json --serving 0 --runs 1 --passes 2 \
    >"$OUT/dsinfer-$1-$3.json" 2>"$OUT/dsinfer-$1-$3.log"
}
peer_run() {  # name gguf round
  echo "round $3: ik_llama.cpp $1" >&2
  # shellcheck disable=SC2086
  "$IK/build/bin/llama-bench" -m "$2" -t "$THREADS" -p 64,512 -n 16 -r 1 $PEER_ARGS -o json \
    >"$OUT/peer-$1-$3.json" 2>"$OUT/peer-$1-$3.log"
}
for round in $(seq "$ROUNDS"); do
  ds_run fp8 "$MP1" "$round"
  ds_run int4 "$MP1_INT4" "$round"
  ds_run int4-int8 "$MP1_INT4" "$round" --act-dtype int8
  peer_run q8 "$GGUF16" "$round"
  peer_run q4exps "$GGUF_Q4" "$round"
done
"$PY" - "$OUT" "$(git -C "$IK" rev-parse --short HEAD)" "$PEER_ARGS" "$THREADS" <<'PYEOF'
import glob, json, os, sys
out, peer_commit, peer_args, threads = sys.argv[1:5]
rounds = len(glob.glob(os.path.join(out, "dsinfer-fp8-*.json")))
def load(name):
    return json.load(open(os.path.join(out, name)))
ds = {k: [load(f"dsinfer-{k}-{i}.json") for i in range(1, rounds + 1)] for k in ("fp8", "int4", "int4-int8")}
peer = {k: [load(f"peer-{k}-{i}.json") for i in range(1, rounds + 1)] for k in ("q8", "q4exps")}
def span(values, fmt="{:.1f}"):
    values = [v for v in values if v is not None]
    if not values: return "-"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "-" + fmt.format(hi)
def decode(run, batch, key):
    return next(d[key] for d in run["decode"] if d["batch"] == batch)
def prefill(run, tokens, key):
    return next(p[key] for p in run["prefill"] if p["tokens"] == tokens)
def peer_ts(run, n_prompt, n_gen):
    return next(e["avg_ts"] for e in run if e["n_prompt"] == n_prompt and e["n_gen"] == n_gen)
ceil = [r["ceilings"]["read_gbps"] for k in ds for r in ds[k]]
print(f"int4 routed experts against fp8 on the bench slice, dsinfer (exact mode unless said) and ik_llama.cpp {peer_commit} "
      f"({peer_args}), {threads} threads, {rounds} rounds alternating; read ceiling {span(ceil)} GB/s")
print()
print("| | weight GB per decode token | decode batch 1 tok/s (GB/s) | decode batch 4 tok/s | prefill 64 tok/s | prefill 512 tok/s |")
print("|---|---|---|---|---|---|")
for k, name in (("fp8", "dsinfer fp8 (as converted)"), ("int4", "dsinfer --experts-int4"),
                ("int4-int8", "dsinfer --experts-int4, --act-dtype int8")):
    runs = ds[k]
    print(f"| {name} | {decode(runs[0], 1, 'weight_bytes_per_token') / 1e9:.2f} | "
          f"{span([decode(r, 1, 'tokens_per_s') for r in runs], '{:.2f}')} ({span([decode(r, 1, 'gbps') for r in runs])}) | "
          f"{span([decode(r, 4, 'tokens_per_s') for r in runs])} | {span([prefill(r, 64, 'tokens_per_s') for r in runs])} | "
          f"{span([prefill(r, 512, 'tokens_per_s') for r in runs])} |")
for k, name in (("q8", "ik_llama.cpp Q8_0, bf16 head"), ("q4exps", "ik_llama.cpp Q8_0, Q4_0 experts, bf16 head")):
    runs = peer[k]
    print(f"| {name} | - | {span([peer_ts(r, 0, 16) for r in runs], '{:.2f}')} | - | "
          f"{span([peer_ts(r, 64, 0) for r in runs])} | {span([peer_ts(r, 512, 0) for r in runs])} |")
print()
ratio = lambda a, b: [x / y for x, y in zip(a, b)]
print("int4 / fp8 per round (same round, adjacent runs): dsinfer decode batch 1 "
      f"{span(ratio([decode(r, 1, 'tokens_per_s') for r in ds['int4']], [decode(r, 1, 'tokens_per_s') for r in ds['fp8']]), '{:.2f}')}, "
      f"batch 4 {span(ratio([decode(r, 4, 'tokens_per_s') for r in ds['int4']], [decode(r, 4, 'tokens_per_s') for r in ds['fp8']]), '{:.2f}')}, "
      f"prefill 512 {span(ratio([prefill(r, 512, 'tokens_per_s') for r in ds['int4']], [prefill(r, 512, 'tokens_per_s') for r in ds['fp8']]), '{:.2f}')}; "
      f"ik_llama.cpp decode {span(ratio([peer_ts(r, 0, 16) for r in peer['q4exps']], [peer_ts(r, 0, 16) for r in peer['q8']]), '{:.2f}')}, "
      f"prefill 512 {span(ratio([peer_ts(r, 512, 0) for r in peer['q4exps']], [peer_ts(r, 512, 0) for r in peer['q8']]), '{:.2f}')}")
parts = lambda run: {p["part"]: p for p in next(d for d in run["decode"] if d["batch"] == 1)["parts_rank0"]}
print("dsinfer decode batch 1, the moe part (routed + shared experts, router): fp8 "
      f"{span([parts(r)['moe']['seconds'] * 1e3 for r in ds['fp8']])} ms for {parts(ds['fp8'][0])['moe']['weight_bytes'] / 1e6:.0f} MB, int4 "
      f"{span([parts(r)['moe']['seconds'] * 1e3 for r in ds['int4']])} ms for {parts(ds['int4'][0])['moe']['weight_bytes'] / 1e6:.0f} MB, int4 in int8 mode "
      f"{span([parts(r)['moe']['seconds'] * 1e3 for r in ds['int4-int8']])} ms for {parts(ds['int4-int8'][0])['moe']['weight_bytes'] / 1e6:.0f} MB; "
      f"as GB/s against each run's read ceiling: fp8 {span([parts(r)['moe']['weight_bytes'] / parts(r)['moe']['seconds'] / 1e9 / r['ceilings']['read_gbps'] for r in ds['fp8']], '{:.2f}')}, "
      f"int4 {span([parts(r)['moe']['weight_bytes'] / parts(r)['moe']['seconds'] / 1e9 / r['ceilings']['read_gbps'] for r in ds['int4']], '{:.2f}')}, "
      f"int4 in int8 mode {span([parts(r)['moe']['weight_bytes'] / parts(r)['moe']['seconds'] / 1e9 / r['ceilings']['read_gbps'] for r in ds['int4-int8']], '{:.2f}')}")
PYEOF
