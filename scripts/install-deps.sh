#!/usr/bin/env bash
# Installs every build and test dependency of dsinfer on Debian 12 (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
packages=(cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libssl-dev libonig-dev libedit-dev pkg-config libopenmpi-dev openmpi-bin libgloo-dev iproute2 libcpp-httplib-dev libdlpack-dev curl)
# --tests: also what only the tests use (Debian's torchrun, for the real-torchrun launch test; ping,
#   for the delayed two-namespace test's round trip)
# --fuzz: clang with libFuzzer and its sanitizer runtimes (the fuzz targets, tests/fuzz/README.md)
# --browser: Debian's chromium, for the chat page's browser test (tests/serve_chat_page_test.cpp)
# --peer: what the benchmarks (bench/peer/, bench/scale_out.sh) need beyond the build: numpy for
#   make_gguf.py, ping for the scale-out benchmark's round-trip check
for arg in "$@"; do
  case $arg in
    --tests) packages+=(python3-torch iputils-ping clang-format gdb) ;;
    --fuzz) packages+=(clang libclang-rt-dev) ;;
    --browser) packages+=(chromium) ;;
    --peer) packages+=(python3-numpy iputils-ping) ;;
    *) echo "usage: $0 [--tests] [--fuzz] [--browser] [--peer]" >&2; exit 1 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
