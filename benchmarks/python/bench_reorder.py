#!/usr/bin/env python3
"""Reorderer from NumPy vs the C++ reorderer, same instance, same process.

    python benchmarks/python/bench_reorder.py [--quick] [--json] [--check]

Instances (costs: lognormal(0, 0.6) ms, fixed seed, default options):
  - 4096 samples x 1 module over 256 DP replicas, 1 microbatch (the
    "1 module" case of benchmarks/bench_reorder.cpp);
  - 4096 samples x 3 modules, dp 64/256/32, 8 microbatches, 1F1B over 1+4+1 stages.

Per call, thread CPU time (the figure compared: a shared machine's wall clock
is noisy; the GIL-released work runs on the calling thread) and wall time,
medians over interleaved rounds:
  python        disttrain.reorder(costs, dp, m): float64 array in, dict of NumPy
                arrays out (the reorderer it keeps per thread and option set reused)
  C++           the same from the same array in C++: refill a reused
                std::vector<sample_meta> from the cost array, then assign() on a
                reused reorderer<> and reorder_result (a C++ trainer holding its
                costs in an array; disttrain._core.bench_reorder_cpp mode "fill")
  C++ assign    assign() alone, sample_meta built once outside the timing (the
                figure benchmarks/bench_reorder.cpp reports; mode "assign")
ratio = python / C++; ratio vs assign = python / C++ assign (it also counts
writing the 80-byte sample_meta records, 0.3 MB at n = 4096, which the C++
assign-only figure leaves out). --check exits 1 when the 256-replica ratio
exceeds 1.2.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import disttrain
from disttrain import _core

LIMIT = 1.2


def py_times(fn, reps, wall, cpu):
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)


def case(name, costs, dp, microbatches, stages, rounds, reps):
    kw = {} if stages is None else {"stages": stages}
    opts = json.dumps(disttrain.Reorderer(dp, microbatches, **kw).options)
    a = disttrain.reorder(costs, dp, microbatches, **kw)  # warm-up, and the same answer
    b = disttrain.Reorderer(dp, microbatches, **kw).assign(costs)
    assert all(np.array_equal(a[k], b[k]) for k in ("microbatch", "replica", "offset"))
    t = {k: {"wall": [], "cpu": []} for k in ("py", "cpp", "cpp_assign")}
    for _ in range(rounds):  # interleaved, so drift on a shared machine hits all alike
        py_times(lambda: disttrain.reorder(costs, dp, microbatches, **kw), reps, **t["py"])
        for key, mode in (("cpp", "fill"), ("cpp_assign", "assign")):
            for k, v in _core.bench_reorder_cpp(costs, opts, reps, mode).items():
                t[key][k] += v
    med = {f"{k}_{c}_s": statistics.median(v[c]) for k, v in t.items() for c in ("cpu", "wall")}
    return {
        "case": name, "n": int(costs.shape[0]), "dp": dp, "microbatches": microbatches, **med,
        "ratio": med["py_cpu_s"] / med["cpp_cpu_s"],
        "ratio_wall": med["py_wall_s"] / med["cpp_wall_s"],
        "ratio_vs_assign": med["py_cpu_s"] / med["cpp_assign_cpu_s"],
        "calls_per_figure": rounds * reps,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 if the 256-replica ratio exceeds {LIMIT}")
    a = ap.parse_args()
    rounds, reps = (3, 10) if a.quick else (7, 30)
    rng = np.random.default_rng(12345)
    one = rng.lognormal(0.0, 0.6, size=(4096, 1)) * 1e-3
    three = rng.lognormal(0.0, 0.6, size=(4096, 3)) * 1e-3
    rows = [
        case("1 module, dp 256, 1 microbatch", one, [256], 1, None, rounds, reps),
        case("3 modules, dp 64/256/32, 8 microbatches", three, [64, 256, 32], 8,
             [(0, 1.0, 2.0)] + [(1, 0.25, 0.5)] * 4 + [(2, 1.0, 2.0)], rounds, reps),
    ]
    ok = rows[0]["ratio"] <= LIMIT
    if a.json:
        print(json.dumps({"benchmark": "python_reorder", "disttrain": disttrain.__version__,
                          "limit": LIMIT, "ok": ok, "cases": rows}, indent=2))
    else:
        print(f"disttrain {disttrain.__version__}: reorder from NumPy vs C++, 4096 samples; "
              f"CPU time per call, median of {rows[0]['calls_per_figure']} (wall ratio too)")
        print(f"{'case':<40} {'python':>9} {'C++':>9} {'ratio':>6} {'(wall)':>6} | "
              f"{'C++ assign':>10} {'ratio':>6}")
        for r in rows:
            print(f"{r['case']:<40} {r['py_cpu_s']*1e3:>7.3f}ms {r['cpp_cpu_s']*1e3:>7.3f}ms "
                  f"{r['ratio']:>6.3f} {r['ratio_wall']:>6.3f} | "
                  f"{r['cpp_assign_cpu_s']*1e3:>8.3f}ms {r['ratio_vs_assign']:>6.3f}")
        print(f"256 replicas: disttrain.reorder() / C++ = {rows[0]['ratio']:.3f} "
              f"({'<=' if ok else '>'} {LIMIT})")
    if a.check and not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
