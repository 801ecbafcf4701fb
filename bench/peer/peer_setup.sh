# Sourced by the peer scripts (run_ik_llama.sh, run_llama_server.sh, side_by_side.sh,
# int4_side_by_side.sh): the peer,
# ik_llama.cpp, cloned from the local bare mirror and built once (cached in $W), and the bench
# slice as GGUF, written once: Q8_0 ($GGUF) and Q8_0 with the head in bf16 ($GGUF16, dsinfer's
# bytes per decoded token).
#   peer_setup TARGET...   builds those CMake targets (llama-bench, llama-server, llama-quantize)
# Expects W (work dir); reads HF, MIRROR, PY from the environment.
HF=${HF:-/work/bench-slice/hf}
MIRROR=${MIRROR:-/work/.mirror/ikawrakow+ik_llama.cpp/repo}
PY=${PY:-/usr/bin/python3}
PEER_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IK=$W/ik_llama.cpp
GGUF=$W/slice-q8_0.gguf
GGUF16=$W/slice-q8_0-headbf16.gguf

# The dsinfer side of the side-by-side scripts: their defaults (MP1, DSINFER, THREADS, ROUNDS,
# PEER_ARGS) and checks.
side_by_side_setup() {
  MP1=${MP1:-/work/bench-slice/mp1}
  DSINFER=${DSINFER:-build/dsinfer}
  THREADS=${THREADS:-2}
  ROUNDS=${ROUNDS:-3}
  PEER_ARGS=${PEER_ARGS:--rtr 1}
  [ -x "$DSINFER" ] || { echo "error: no dsinfer binary at $DSINFER (scripts/build.sh)" >&2; exit 1; }
  [ -f "$MP1/config.json" ] || { echo "error: no converted slice at $MP1 (bench/README.md)" >&2; exit 1; }
}

peer_setup() {
  mkdir -p "$W"
  if [ ! -d "$IK" ]; then
    [ -d "$MIRROR" ] || { echo "error: no ik_llama.cpp mirror at $MIRROR (fetch github:ikawrakow/ik_llama.cpp, or set MIRROR)" >&2; return 1; }
    git clone -q --no-checkout "$MIRROR" "$IK"
    # the mirror lacks a few large files (vocab .gguf test files, two web-UI pages): skip only
    # those; the server embeds the rest of its web UI at build time
    git -C "$IK" restore --source=HEAD --staged --worktree -- . ':(exclude)models/*.gguf' \
      ':(exclude)examples/server/public_llamacpp/index_llamacpp.html' ':(exclude)examples/server/webui/dist/index.html'
  fi
  echo "ik_llama.cpp commit: $(git -C "$IK" rev-parse HEAD)" >&2
  local missing=()
  for target in "$@"; do [ -x "$IK/build/bin/$target" ] || missing+=("$target"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "building ik_llama.cpp: ${missing[*]} (CPU only, -march=native, -j2; ~15 min on 2 cores)" >&2
    cmake -S "$IK" -B "$IK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DLLAMA_CURL=OFF \
      -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null
    cmake --build "$IK/build" -j2 --target "${missing[@]}" >"$W/build.log" 2>&1 ||
      { echo "error: the peer build failed, see $W/build.log" >&2; return 1; }
  fi
  if [ ! -f "$GGUF" ]; then
    "$PY" -c "import numpy" 2>/dev/null ||
      { echo "error: $PY has no numpy (make_gguf.py needs it): scripts/install-deps.sh --peer" >&2; return 1; }
    [ -f "$HF/config.json" ] || { echo "error: no HF slice at $HF (bench/README.md: make-random)" >&2; return 1; }
    if [ ! -f "$HF/tokenizer.json" ]; then  # make-random writes none; the GGUF needs DeepSeek-V3's
      echo "copying DeepSeek-V3's tokenizer (tests/data/tokenizer/deepseek-v3) into $HF" >&2
      cp "$PEER_HERE/../../tests/data/tokenizer/deepseek-v3/"tokenizer*.json "$HF/"
    fi
    echo "writing $GGUF from $HF" >&2
    PYTHONPATH="$IK/gguf-py" "$PY" "$PEER_HERE/make_gguf.py" "$HF" "$GGUF.tmp" >&2
    mv "$GGUF.tmp" "$GGUF"
  fi
  if [ ! -f "$GGUF16" ]; then
    "$IK/build/bin/llama-quantize" --allow-requantize --output-tensor-type bf16 "$GGUF" "$GGUF16.tmp" Q8_0 2 >/dev/null 2>&1
    mv "$GGUF16.tmp" "$GGUF16"
  fi
}
