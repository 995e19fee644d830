#!/usr/bin/env python3
"""Hashes of what a refactor must keep: the planner's plans (every preset,
three option sets, with the simulated iterations that run the reorderer's
maps), the reorderer's maps on the benchmark's data shapes, and the bound
per-rank programs (every op's peer, bytes, tag, stamp and copy blocks) of
every rank of four topologies (colocated, frozen, TP fan-out, DP ratios).

    scripts/result_hashes.py [BUILD_DIR]     (default build/dev)

Run it before and after a change and diff the output: equal lines mean equal
results. Timing fields (solve_ms, wall_s, ... and the benchmark's times) are
left out; everything else is hashed as the tools print it. Needs
BUILD_DIR/tools/disttrain-plan, and BUILD_DIR/benchmarks/bench_reorder for
the map lines (configure with -DDISTTRAIN_BUILD_BENCHMARKS=ON; skipped, and
said, without it), and the Python package (scripts/quickstart.sh test-python
installs it into build/python-venv; run this script with that venv's python)
for the program lines (skipped, and said, without it).
"""
import hashlib
import json
import os
import subprocess
import sys

PRESETS = ["mllm-7b", "mllm-13b", "mllm-70b", "paper-72b", "hires-70b", "video-70b", "gen-70b",
           "dual-7b"]
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
        bind_hashes()
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
    bind_hashes()


# Topologies whose every rank's bound program is hashed: a colocated encoder
# before the backbone (module ids and rank-owning indices differ), a frozen
# encoder, TP fan-out on both sides, DP ratios 2->1, 1->3, 3->2.
BIND_TOPOLOGIES = [
    [{"name": "vit", "role": "encoder", "tp": 1, "pp": 1, "dp": 2},
     {"name": "llm", "role": "backbone", "tp": 2, "pp": 2, "dp": 1},
     {"name": "dit", "role": "generator", "tp": 1, "pp": 1, "dp": 1}],
    [{"name": "vit", "role": "encoder", "colocated": True},
     {"name": "llm", "role": "backbone", "tp": 2, "pp": 2, "dp": 2},
     {"name": "dit", "role": "generator", "tp": 2, "pp": 1, "dp": 3}],
    [{"name": "vit", "role": "encoder", "tp": 2, "pp": 1, "dp": 3, "trainable": False},
     {"name": "llm", "role": "backbone", "tp": 1, "pp": 3, "dp": 2, "layers": [3, 2, 3]},
     {"name": "dit", "role": "generator", "colocated": True}],
    [{"name": "audio", "role": "encoder", "tp": 1, "pp": 2, "dp": 1},
     {"name": "llm", "role": "backbone", "tp": 4, "pp": 1, "dp": 1}],
]


# Program keys left out (DISTTRAIN_HASH_SKIP=a,b): to compare a change that
# adds keys with the hashes from before it.
SKIP = set(filter(None, os.environ.get("DISTTRAIN_HASH_SKIP", "").split(",")))


def bind_hashes():
    try:
        import numpy as np
        import disttrain as dt
    except ImportError as e:
        print(f"bound programs: skipped (the Python package is not importable: {e})")
        return
    rng = np.random.default_rng(7)
    for i, topo in enumerate(BIND_TOPOLOGIES):
        t = dt.topology(topo)
        owning = t["owning_modules"]
        n, mb = 24, 4
        costs = rng.uniform(0.5, 2.0, size=(n, len(owning)))
        m = dt.reorderer_of(topo, mb).assign(costs)
        links = len(t["path"]) - 1
        shapes = [{"hidden": 8 + 4 * l, "rows": rng.integers(1, 9, size=n), "elem_size": 2}
                  for l in range(links)]
        for split in (False, True):
            h = hashlib.sha256()
            for r in range(t["world_size"]):
                prog = dt.bind_rank(topo, m, shapes, r, buckets=2, split_backward=split)
                for k in sorted(k for k in prog if k not in SKIP):
                    v = prog[k]
                    h.update(k.encode())
                    if isinstance(v, np.ndarray):
                        h.update(str(v.dtype).encode() + np.ascontiguousarray(v).tobytes())
                    elif isinstance(v, list):
                        for b in v:
                            h.update(b"-" if b is None else np.ascontiguousarray(b).tobytes())
                    else:
                        h.update(repr(v).encode())
            print(f"program topology{i} {'split' if split else 'fused':12} {h.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
