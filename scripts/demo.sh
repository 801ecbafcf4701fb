#!/usr/bin/env bash
# The main job on the bundled tiny checkpoint: install, build, convert the tiny DeepSeek-V3
# checkpoint (fp8, MLA, MoE with group-limited sigmoid routing, an MTP layer that convert drops)
# into 2-way tensor-parallel-ready shards at mp 1, then run it: prefill, decode and greedy
# generation of the golden case, compared with the reference's own output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
OUT=${OUT:-out/tiny-v3}
HF=tests/data/golden/tiny-v3/hf
rm -rf "$OUT"
build/dsinfer convert --hf-ckpt-path "$HF" --save-path "$OUT" --n-experts 8 --model-parallel 1
build/dsinfer eval --ckpt-path "$OUT" --case tests/data/golden/tiny-v3/ref-mp1-fp32.json --out "$OUT/eval"
echo "dsinfer greedy completions:"
cat "$OUT/eval.json"
echo "reference greedy completions:"
python3 -c 'import json,sys; print(json.dumps({"completions": json.load(open(sys.argv[1]))["generate"]["completions"]}, separators=(",", ":")))' \
  tests/data/golden/tiny-v3/ref-mp1-fp32.json 2>/dev/null || grep -o '"completions": [^}]*' tests/data/golden/tiny-v3/ref-mp1-fp32.json
