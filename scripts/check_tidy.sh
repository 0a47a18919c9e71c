#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy) over lib/ and app/ with the main build's compile
# commands (build/compile_commands.json; scripts/build.sh first). Exits non-zero on any finding.
# By hand, not in CI: with libtorch's headers each file takes tens of seconds, too long for CI's
# budget on 2 cores. Extra arguments are file-name regexes (default: every file of lib/ and app/).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v run-clang-tidy >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends clang-tidy >/dev/null
fi
[ -f build/compile_commands.json ] || { echo "check_tidy: run scripts/build.sh first" >&2; exit 1; }
filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then filters=("$PWD/(lib|app)/"); fi
# -quiet: only findings; -extra-arg: libtorch's headers are system headers, gcc's own flags stay.
run-clang-tidy -quiet -p build -j "$(nproc)" "${filters[@]}"
