#!/usr/bin/env bash
# sgemm of OpenBLAS (what titan-train runs), BLIS and oneDNN on the debug model's GEMM shapes
# (the forward, input-gradient and weight-gradient GEMM of every linear layer, a step's 2,048
# tokens), in interleaved rounds: a step's GEMM time per library, median with its min-max spread,
# and each shape's GFLOP/s (scripts/bench/blas_libraries.py). Installs Debian's BLIS
# (libblis4-pthread) if missing; oneDNN (libdnnl2) comes with libtorch.
#
#   [ROUNDS=5] [THREADS=<cores>] scripts/bench_blas.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -e /usr/lib/x86_64-linux-gnu/libblis.so.4 ]; then
  echo "bench_blas: installing libblis4-pthread"
  apt-get install -y -qq libblis4-pthread >/dev/null
fi
exec python3 scripts/bench/blas_libraries.py --rounds "${ROUNDS:-5}" --threads "${THREADS:-$(nproc)}"
