#!/usr/bin/env bash
# Peer benchmark: ik_llama.cpp on the dsinfer bench slice, CPU only, 2 threads.
#   1. clone ik_llama.cpp from the local bare mirror (large LFS-style files the mirror
#      lacks -- vocab .gguf test files, web-UI assets -- are skipped at checkout),
#   2. build llama-bench (Release, CPU only, -march=native) with -j2,
#   3. write slice-q8_0.gguf from the HF-layout fp8 slice with make_gguf.py (numpy +
#      ik_llama.cpp's gguf-py; no torch/transformers needed),
#   4. make a variant with the output head in bf16 (llama-quantize copies every other
#      tensor unchanged), matching dsinfer's bf16 head bytes per decoded token,
#   5. run llama-bench: pp64, pp512, tg32 with ik defaults (-mla 3 -fa 1 -fmoe 1), with
#      the CPU options ik_llama.cpp's docs suggest (-rtr 1, -amb 512), and mla/fa/fmoe off.
# Usage: bash bench/peer/run_ik_llama.sh [workdir]   (default workdir /work/peer)
# Env: HF=/work/bench-slice/hf MIRROR=/work/.mirror/ikawrakow+ik_llama.cpp/repo
#      PY=/usr/bin/python3 (needs python3-numpy), REPS=2
set -euo pipefail
W=${1:-/work/peer}
REPS=${REPS:-2}
source "$(dirname "$0")/peer_setup.sh"
peer_setup llama-bench llama-quantize
ls -l "$GGUF" "$GGUF16"

for M in "$GGUF" "$GGUF16"; do
  BENCH="$IK/build/bin/llama-bench -m $M -t 2 -p 64,512 -n 32 -r $REPS"
  echo "== $(basename "$M"): defaults (-mla 3 -fa 1 -fmoe 1)"; $BENCH
  echo "== $(basename "$M"): -rtr 1";                          $BENCH -rtr 1
  echo "== $(basename "$M"): -rtr 1 -amb 512";                 $BENCH -rtr 1 -amb 512
  echo "== $(basename "$M"): -mla 0 -fa 0 -fmoe 0";            $BENCH -mla 0 -fa 0 -fmoe 0
done
