#!/usr/bin/env bash
# Installs titan-train's build and run dependencies with apt, skipping what is already there.
# libopenblas0-pthread matters: without it Debian's libtorch uses the reference BLAS, 10-25x
# slower on matmuls. With --tests, also what the Python tests need: Debian's matplotlib for the
# plot test and Debian's PyTorch for the safetensors interop test (without them ctest reports
# those two skipped).
set -euo pipefail

packages=(libtorch-dev libtomlplusplus-dev libcxxopts-dev libfmt-dev catch2 libgloo-dev libopenblas0-pthread
          libpcre2-dev nlohmann-json3-dev cmake g++ ninja-build)
if [ "${1:-}" = "--tests" ]; then packages+=(python3-matplotlib python3-torch python3-protobuf); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
