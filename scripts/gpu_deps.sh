#!/usr/bin/env bash
# Prepares, on a Debian machine with apt, the header-only build dependencies that
# scripts/gpu_check.sh carries to a GPU machine without a package registry: Debian's -dev packages
# of toml++, cxxopts, fmt, Catch2 and gloo (headers for c10d's ProcessGroupGloo), PCRE2 and
# nlohmann-json (the tokenizer; PCRE2's static library is linked), and zlib (its static libz.a:
# the image may lack zlib1g-dev), downloaded (not installed) and unpacked into .gpu-deps/
# (ignored by git). gpu_check.sh builds with CMAKE_PREFIX_PATH=.gpu-deps/usr and
# TITAN_HEADER_ONLY_DEPS=ON, so no libfmt.so or libtomlplusplus.so is needed there.
# libtorch is not among them: gpu_check.sh uses the one inside the machine's PyTorch install.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libtomlplusplus-dev libcxxopts-dev libfmt-dev catch2 libgloo-dev libpcre2-dev
          nlohmann-json3-dev zlib1g-dev)
dest=.gpu-deps
rm -rf "$dest"
mkdir -p "$dest/debs"
if ! (cd "$dest/debs" && apt-get download "${packages[@]}" >/dev/null 2>&1); then
  # No package lists yet (a fresh machine): fetch them once, then try again.
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  (cd "$dest/debs" && apt-get download "${packages[@]}" >/dev/null)
fi
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest"; done
# shellcheck disable=SC2016
for deb in "$dest"/debs/*.deb; do dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"; done \
  >"$dest/PACKAGES"
# The .so links point at runtime packages that are not carried (header-only use).
find "$dest" -name '*.so' -type l -delete
rm -rf "$dest/debs" "$dest/usr/share/doc"
echo "gpu_deps: $(paste -sd, "$dest/PACKAGES") in $dest/ ($(du -sh "$dest" | cut -f1))"
