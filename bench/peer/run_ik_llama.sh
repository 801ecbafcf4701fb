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
HF=${HF:-/work/bench-slice/hf}
MIRROR=${MIRROR:-/work/.mirror/ikawrakow+ik_llama.cpp/repo}
PY=${PY:-/usr/bin/python3}
REPS=${REPS:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
IK=$W/ik_llama.cpp
GGUF=$W/slice-q8_0.gguf
mkdir -p "$W"

if [ ! -d "$IK" ]; then
  git clone -q --no-checkout "$MIRROR" "$IK"
  git -C "$IK" restore --source=HEAD --staged --worktree -- . ':(exclude)models/*.gguf' \
    ':(exclude)examples/server/public_llamacpp' ':(exclude)examples/server/webui/dist'
fi
echo "ik_llama.cpp commit: $(git -C "$IK" rev-parse HEAD)"

if [ ! -x "$IK/build/bin/llama-bench" ]; then
  time ( cmake -S "$IK" -B "$IK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
           -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null &&
         cmake --build "$IK/build" -j2 --target llama-bench llama-quantize >/dev/null )
fi

if [ ! -f "$GGUF" ]; then
  time PYTHONPATH="$IK/gguf-py" "$PY" "$HERE/make_gguf.py" "$HF" "$GGUF.tmp"
  mv "$GGUF.tmp" "$GGUF"
fi
GGUF16=$W/slice-q8_0-headbf16.gguf
[ -f "$GGUF16" ] || "$IK/build/bin/llama-quantize" --allow-requantize --output-tensor-type bf16 \
  "$GGUF" "$GGUF16" Q8_0 2 >/dev/null 2>&1
ls -l "$GGUF" "$GGUF16"

for M in "$GGUF" "$GGUF16"; do
  BENCH="$IK/build/bin/llama-bench -m $M -t 2 -p 64,512 -n 32 -r $REPS"
  echo "== $(basename "$M"): defaults (-mla 3 -fa 1 -fmoe 1)"; $BENCH
  echo "== $(basename "$M"): -rtr 1";                          $BENCH -rtr 1
  echo "== $(basename "$M"): -rtr 1 -amb 512";                 $BENCH -rtr 1 -amb 512
  echo "== $(basename "$M"): -mla 0 -fa 0 -fmoe 0";            $BENCH -mla 0 -fa 0 -fmoe 0
done
