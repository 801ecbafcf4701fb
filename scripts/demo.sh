#!/usr/bin/env bash
# The main job on the bundled checkpoint: install, build, convert tiny-v3-story (the DeepSeek-V3
# architecture: MLA, fp8 weights, MoE with group-limited sigmoid routing, an MTP layer that convert
# drops; trained on the Brown corpus, with the real DeepSeek-V3 tokenizer) and chat with it.
# Interactive on a terminal; with stdin not a terminal it answers tests/data/demo_prompts.txt.
# Extra arguments go to `dsinfer generate` (e.g. --temperature 0 --max-new-tokens 40).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
TARGETS=dsinfer scripts/build.sh >&2  # (progress on stderr) the binary only: the tests are scripts/test.sh's
OUT=${OUT:-out/tiny-v3-story}
if [ ! -f "$OUT/model0-mp1.safetensors" ]; then
  build/dsinfer convert --hf-ckpt-path tests/data/golden/tiny-v3-story/hf --save-path "$OUT" \
    --n-experts 8 --model-parallel 1
  cp tests/data/tokenizer/deepseek-v3/tokenizer.json tests/data/tokenizer/deepseek-v3/tokenizer_config.json "$OUT/"
fi
if [ -t 0 ]; then
  echo "Chatting with the tiny story model: type a sentence, /clear to forget, /exit (or Ctrl-D) to end." >&2
  exec build/dsinfer generate --ckpt-path "$OUT" --interactive "$@"
else
  exec build/dsinfer generate --ckpt-path "$OUT" --input-file tests/data/golden/tiny-v3-story/prompts.txt "$@"
fi
