#!/usr/bin/env bash
# The format check of the test command: every C++ source (src, apps, tests, bench) as the repo's
# .clang-format (Google style, 100 columns) writes it. Fix with: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'apps/*.cpp' 'apps/*.h' 'tests/*.cpp' 'tests/*.h' 'bench/*.cpp' 'bench/*.h')
if [ "${1:-}" = --fix ]; then exec clang-format -i "${files[@]}"; fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "error: the files above are not formatted (scripts/check-format.sh --fix formats them)" >&2
  exit 1
fi
