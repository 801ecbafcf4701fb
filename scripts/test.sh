#!/usr/bin/env bash
# The test command: installs dependencies, checks the format (scripts/check-format.sh), builds,
# runs the tests (unit, multi-process and golden; those labelled slow only with ALL=1) with ctest. Extra arguments go to ctest (e.g.
# -L unit, -R Golden). The sanitizer and fuzz suite (scripts/test-sanitized.sh: the unit and
# multi-process tests again under ASan + UBSan in build-san, and a minute of each fuzzer) is its
# own command, which CI (.ci/run) runs after this one; SANITIZED=1 runs it here too.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI (ALL=1) also installs chromium for the chat page's browser test (about a minute of apt; the
# quick run skips that test without it)
extra=()
if [ "${SANITIZED:-0}" != 0 ]; then extra+=(--fuzz); fi
if [ "${ALL:-0}" != 0 ]; then extra+=(--browser); fi
scripts/install-deps.sh --tests "${extra[@]}"
scripts/check-format.sh  # the repo's .clang-format, before the (longer) build
scripts/build.sh
# real clients from npm (tests/openai_client: the official openai client, the AI SDK, LangChain.js,
# puppeteer-core for the chat page), for tests/serve_{openai_client,clients,chat_page}_test.cpp
# (skipped without them)
if command -v npm >/dev/null; then
  npm_dir="${BUILD_DIR:-build}/npm"
  mkdir -p "$npm_dir"
  cp tests/openai_client/package.json tests/openai_client/*.mjs "$npm_dir/"
  cmp -s tests/openai_client/package.json "$npm_dir/installed.json" ||
    { npm install --prefix "$npm_dir" --silent --no-audit --no-fund &&
      cp tests/openai_client/package.json "$npm_dir/installed.json"; } ||
    echo "warning: npm install of the client packages failed; their tests will be skipped" >&2
fi
# the quick run leaves the tests labelled slow out (minutes of perplexity and depth runs); ALL=1
# (CI) runs them too, as do explicit label arguments (e.g. -L slow)
slow=(-LE slow)
if [ "${ALL:-0}" != 0 ] || [[ " $* " == *" -L "* ]]; then slow=(); fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "${slow[@]}" "$@"
if [ "${SANITIZED:-0}" != 0 ]; then scripts/test-sanitized.sh; fi
