#!/usr/bin/env python3
"""sgemm of the BLAS libraries Debian offers, on the debug model's GEMM shapes, in interleaved rounds.

Driven by scripts/bench_blas.sh. Each library is called through ctypes on the same float32
operands, row-major as ATen lays them out: OpenBLAS (what titan-train runs) and BLIS through
their Fortran `sgemm_`, oneDNN through `dnnl_sgemm`. Per linear layer of the debug model (dim 256,
FFN hidden 768, vocab 2048, a step's 2,048 tokens) the three GEMMs of a training step: the
forward y = x W^T, the input gradient dx = dy W and the weight gradient dW = dy^T x. A round
times every shape with every library (best of --reps calls); the script prints, per library, the
median over rounds of a step's GEMM time (each shape weighted by how many times a step runs it)
with the min-max spread, the GFLOP/s that makes, and per shape the median GFLOP/s.

Every library's thread count is set to --threads through its environment variable before any is
loaded (OPENBLAS_NUM_THREADS, BLIS_NUM_THREADS, OMP_NUM_THREADS for oneDNN's OpenMP).
Only the standard library is used.
"""
import argparse
import ctypes
import os
import random
import statistics
import sys
import time

# (name, out_features, in_features, times a step runs it) of the debug model's linear layers.
LAYERS = [("attention wq/wk/wv/wo", 256, 256, 4 * 6), ("ffn w1/w3", 768, 256, 2 * 6),
          ("ffn w2", 256, 768, 6), ("output", 2048, 256, 1)]

LIBRARIES = {
    "openblas": "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "blis": "/usr/lib/x86_64-linux-gnu/libblis.so.4",
    "onednn": "/usr/lib/x86_64-linux-gnu/libdnnl.so.2",
}


def shapes(tokens):
    """(label, M, N, K, transpose_a, transpose_b, count): row-major C (M, N) = op(A) op(B)."""
    out = []
    for name, n_out, n_in, count in LAYERS:
        out.append((name + " forward", tokens, n_out, n_in, False, True, count))
        out.append((name + " input grad", tokens, n_in, n_out, False, False, count))
        out.append((name + " weight grad", n_out, n_in, tokens, True, False, count))
    return out


class Fortran:
    """sgemm_ (column-major): row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.fn = self.lib.sgemm_

    def sgemm(self, m, n, k, ta, tb, a, b, c):
        lda = m if ta else k
        ldb = k if tb else n
        f = ctypes.c_float
        i = ctypes.c_int
        self.fn(ctypes.byref(ctypes.c_char(b"T" if tb else b"N")),
                ctypes.byref(ctypes.c_char(b"T" if ta else b"N")),
                ctypes.byref(i(n)), ctypes.byref(i(m)), ctypes.byref(i(k)), ctypes.byref(f(1.0)),
                b, ctypes.byref(i(ldb)), a, ctypes.byref(i(lda)), ctypes.byref(f(0.0)), c,
                ctypes.byref(i(n)))


class OneDnn:
    """dnnl_sgemm: row-major, by value."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.fn = self.lib.dnnl_sgemm
        d = ctypes.c_int64
        self.fn.argtypes = [ctypes.c_char, ctypes.c_char, d, d, d, ctypes.c_float, ctypes.c_void_p,
                            d, ctypes.c_void_p, d, ctypes.c_float, ctypes.c_void_p, d]
        self.fn.restype = ctypes.c_int

    def sgemm(self, m, n, k, ta, tb, a, b, c):
        lda = m if ta else k
        ldb = k if tb else n
        status = self.fn(b"T" if ta else b"N", b"T" if tb else b"N", m, n, k, 1.0,
                         ctypes.cast(a, ctypes.c_void_p), lda, ctypes.cast(b, ctypes.c_void_p),
                         ldb, 0.0, ctypes.cast(c, ctypes.c_void_p), n)
        if status != 0:
            raise RuntimeError("dnnl_sgemm returned %d" % status)


def buffer(n, rng):
    data = (ctypes.c_float * n)()
    for i in range(0, n, 97):  # a sparse fill is enough: the timing does not depend on values
        data[i] = rng.uniform(-1, 1)
    return data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--tokens", type=int, default=2048)
    args = parser.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    libs = {}
    for name, path in LIBRARIES.items():
        if not os.path.exists(path):
            print("%s: %s is not installed, left out" % (name, path))
            continue
        libs[name] = OneDnn(path) if name == "onednn" else Fortran(path)
    rng = random.Random(0)
    work = shapes(args.tokens)
    biggest = max(max(m * k, k * n, m * n) for _, m, n, k, _, _, _ in work)
    a, b, c = buffer(biggest, rng), buffer(biggest, rng), buffer(biggest, rng)
    step_s = {name: [] for name in libs}
    shape_gflops = {(name, label): [] for name in libs for label, *_ in work}
    for round_index in range(args.rounds + 1):  # round 0 warms up
        order = list(libs.items())
        if round_index % 2:
            order.reverse()
        for name, lib in order:
            total = 0.0
            for label, m, n, k, ta, tb, count in work:
                best = float("inf")
                for _ in range(args.reps):
                    start = time.perf_counter()
                    lib.sgemm(m, n, k, ta, tb, a, b, c)
                    best = min(best, time.perf_counter() - start)
                total += count * best
                shape_gflops[(name, label)].append(2.0 * m * n * k / best / 1e9)
            if round_index:
                step_s[name].append(total)
    flops = sum(count * 2.0 * m * n * k for _, m, n, k, _, _, count in work)
    print("sgemm on the debug model's GEMMs (%d tokens, %d threads, %d rounds, best of %d calls "
          "a shape): a step's GEMM time, median (min-max)" % (args.tokens, args.threads,
                                                              args.rounds, args.reps))
    for name, times in step_s.items():
        med = statistics.median(times)
        print("  %-9s %.1f ms (%.1f-%.1f), %.1f GFLOP/s" % (name, 1e3 * med, 1e3 * min(times),
                                                            1e3 * max(times), flops / med / 1e9))
    print("per shape, median GFLOP/s: " + ", ".join(libs))
    for label, m, n, k, _, _, count in work:
        row = ["%7.1f" % statistics.median(shape_gflops[(name, label)][1:]) for name in libs]
        print("  %-36s (%4d x %4d x %4d) x%-2d %s" % (label, m, n, k, count, " ".join(row)))


if __name__ == "__main__":
    sys.exit(main())
