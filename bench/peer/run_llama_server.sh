#!/usr/bin/env bash
# Peer serving benchmark: ik_llama.cpp's llama-server on the dsinfer bench slice, CPU only, 2
# threads, driven by the same client and load as `dsinfer serve` (build/serve_bench).
#   1. clone ik_llama.cpp from the local bare mirror (as run_ik_llama.sh) and build llama-server
#      and llama-quantize (Release, CPU only, -march=native, -j2),
#   2. write the slice as GGUF Q8_0 with make_gguf.py, and a copy with the head in bf16 (dsinfer's
#      head bytes per token),
#   3. serve it with -np N parallel slots (N = the largest concurrency) and run serve_bench at each
#      concurrency: TTFT, TPOT, ITL, throughput, with fixed-length answers (ignore_eos).
# Usage: bash bench/peer/run_llama_server.sh [workdir]   (default /work/peer)
# Env: HF=/work/bench-slice/hf MIRROR=/work/.mirror/ikawrakow+ik_llama.cpp/repo PY=/usr/bin/python3
#      CONC=1,4,8 REQUESTS=8 WORDS=32 TOKENS=16 PORT=8090 SERVE_BENCH=build/serve_bench
#      EXTRA="-rtr 1" (llama-server options)
set -euo pipefail
W=${1:-/work/peer}
CONC=${CONC:-1,4,8}
REQUESTS=${REQUESTS:-8}
WORDS=${WORDS:-32}
TOKENS=${TOKENS:-16}
PORT=${PORT:-8090}
SERVE_BENCH=${SERVE_BENCH:-build/serve_bench}
EXTRA=${EXTRA:-}
source "$(dirname "$0")/peer_setup.sh"
peer_setup llama-server llama-quantize
MODEL=${MODEL:-$GGUF16}
slots=$(echo "$CONC" | tr ',' '\n' | sort -n | tail -1)
# room per slot for a prompt and its answer (the template adds a few tokens)
"$IK/build/bin/llama-server" -m "$MODEL" -t 2 -np "$slots" -c $((slots * 512)) --host 127.0.0.1 --port "$PORT" \
  $EXTRA >"$W/llama-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.5
done
echo "== llama-server $(basename "$MODEL") -t 2 -np $slots $EXTRA"
"$SERVE_BENCH" --port "$PORT" --concurrency "$CONC" --requests "$REQUESTS" --prompt-words "$WORDS" --max-tokens "$TOKENS"
