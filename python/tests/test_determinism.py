"""The same inputs give the same outputs in separate processes."""
import json
import subprocess
import sys

SCRIPT = r"""
import hashlib, json, numpy as np, disttrain
out = {}
for name in ("mllm-7b", "paper-72b"):
    r = disttrain.plan(name)
    r.pop("solve_ms")  # wall time: the one field that varies
    out[name] = r
    out[name + "/baseline"] = {k: v for k, v in disttrain.plan_baseline(name).items()
                               if k != "solve_ms"}
c = np.random.default_rng(42).lognormal(0.0, 0.7, size=(4096, 3))
res = disttrain.reorder(c, [64, 256, 32], 8)
h = hashlib.sha256()
for k in ("id", "microbatch", "replica", "offset"):
    h.update(res[k].tobytes())
for a in res["load"]:
    h.update(a.tobytes())
out["reorder"] = [h.hexdigest(), res["iteration_time"].hex()]
print(json.dumps(out, sort_keys=True))
"""


def run():
    return subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True,
                          text=True).stdout


def test_two_processes_agree():
    a, b = run(), run()
    assert json.loads(a)["paper-72b"]["plan"]["modules"]
    assert a == b
