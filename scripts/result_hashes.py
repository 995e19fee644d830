#!/usr/bin/env python3
"""Hashes of what a refactor must keep: the planner's plans (every preset,
three option sets, with the simulated iterations that run the reorderer's
maps) and the reorderer's maps on the benchmark's data shapes.

    scripts/result_hashes.py [BUILD_DIR]     (default build/dev)

Run it before and after a change and diff the output: equal lines mean equal
results. Timing fields (solve_ms, wall_s, ... and the benchmark's times) are
left out; everything else is hashed as the tools print it. Needs
BUILD_DIR/tools/disttrain-plan, and BUILD_DIR/benchmarks/bench_reorder for
the map lines (configure with -DDISTTRAIN_BUILD_BENCHMARKS=ON; skipped, and
said, without it).
"""
import hashlib
import json
import os
import subprocess
import sys

PRESETS = ["mllm-7b", "mllm-13b", "mllm-70b", "paper-72b", "hires-70b", "video-70b", "gen-70b"]
OPTION_SETS = {"default": ["--iterations", "2"],
               "zero-bubble": ["--zero-bubble", "--iterations", "2"],
               "expected": ["--data-objective", "expected"]}
# Keys whose values are measured times, not results.
TIMING = ("_ms", "wall_s", "cpu_s", "_us")


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not k.endswith(TIMING)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/dev"
    plan = os.path.join(build, "tools", "disttrain-plan")
    if not os.access(plan, os.X_OK):
        sys.exit(f"result_hashes.py: {plan} not found (build the tools first)")
    for preset in PRESETS:
        for name, opts in OPTION_SETS.items():
            out = subprocess.run([plan, "--preset", preset, "--json", *opts], check=True,
                                 capture_output=True, text=True).stdout
            print(f"plan {preset:10} {name:12} {digest(strip(json.loads(out)))}")
    bench = os.path.join(build, "benchmarks", "bench_reorder")
    if not os.access(bench, os.X_OK):
        print(f"reorder maps: skipped ({bench} not built)")
        return
    for section in ("--e2e", "--limits"):
        out = subprocess.run([bench, section, "--json"], check=True, capture_output=True,
                             text=True).stdout
        rows = json.loads(out)
        rows.pop("benchmark", None)
        # The e2e and limits tables' result columns (times and balances of the maps).
        kept = {k: [{c: v for c, v in r.items() if not c.endswith(TIMING) and "ratio" not in c}
                    for r in t] for k, t in rows.items()}
        print(f"reorder {section[2:]:10} {'':12} {digest(kept)}")


if __name__ == "__main__":
    main()
