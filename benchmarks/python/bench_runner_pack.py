#!/usr/bin/env python3
"""disttrain.torch.Runner's message packing, three ways on the same programs in
the same process: a copy per block into a message that carries the stamp at
its head (the runner's), the same copies with the stamp as a second message
(the runner before it), and one index gather / scatter per message (the
alternative the runner does not take: slower, see the ratios).

    python benchmarks/python/bench_runner_pack.py [--quick]

Programs: every rank of enc (DP 2) -> backbone (TP 2, PP 2) -> gen (DP 3),
bound by disttrain.bind_rank from one reorderer map of N samples (variable
image and text rows, hidden 1024, float32; N = 256, or 64 with --quick) over 8
microbatches. Per repetition, every send op of every rank is packed from its
source buffer and every receive op unpacked into its destination, on CPU
tensors with one thread:
  stamp apart   the copy blocks (bind_rank's "blocks"), one strided copy each,
                into a payload tensor; the stamp a separate int64 tensor
  stamp inside  the same copies into one uint8 message after its 8-byte
                stamp (disttrain.torch's _pack / _unpack)
  index gather  the flat index (bind_rank's "index"): torch.index_select into
                the stamped message, index_copy_ out of it
All three must leave the same bytes (checked). Reported: messages sent per
iteration (all ranks), blocks per message, the median time of each over
interleaved rounds, and the ratios stamp apart / stamp inside and index
gather / stamp inside.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import disttrain
from disttrain import torch as dt

MODULES = [{"name": "enc", "role": "encoder", "dp": 2},
           {"name": "llm", "role": "backbone", "tp": 2, "pp": 2},
           {"name": "gen", "role": "generator", "dp": 3}]
HIDDEN = 1024


def programs(n: int):
    t = disttrain.topology(MODULES)
    g = np.random.default_rng(7)
    ids = g.permutation(100000)[:n].astype(np.uint64)
    rows = {"img": g.integers(1, 9, n), "seq": g.integers(16, 129, n)}
    cmap = disttrain.reorderer_of(t, 8).assign(g.lognormal(size=(n, 3)), ids)
    shapes = []
    for module, _ in t["chain"][:-1]:
        enc = t["modules"][module]["role"] == "encoder"
        shapes.append({"hidden": HIDDEN, "rows": rows["img"] if enc else rows["seq"],
                       "elem_size": 4})
    return [disttrain.bind_rank(t, cmap, shapes, r, index=True) for r in range(t["world_size"])]


def jobs(ps):
    """Per p2p op: (send?, blocks, index tensor, elements, stamp, buffer size)."""
    out = []
    for p in ps:
        size = int(max(max(p["input_elements"]), max(p["output_elements"]), 1))
        for i, k in enumerate(p["kind"]):
            if p["index"][i] is None or p["elements"][i] == 0:
                continue
            send = disttrain.OP_KINDS[k].startswith("send")
            blocks = p["blocks"][i].tolist()
            src_size = max([so + (r - 1) * sl + c for so, _, r, c, sl, _ in blocks] + [size])
            stamp = torch.from_numpy(p["stamp"][i:i + 1].view(np.uint8).copy())  # its 8 bytes
            out.append((send, blocks, torch.from_numpy(p["index"][i]), int(p["elements"][i]),
                        stamp, int(src_size)))
    return out


def received(js, stamp_inside):
    """The messages every receive op finds (built before the timing)."""
    out = []
    for send, _, _, n, stamp, _ in js:
        if send:
            out.append(None)
        elif stamp_inside:
            msg = dt._message(torch, 4 * n, "cpu")
            msg[:8] = stamp
            msg[8:].view(torch.float32).copy_(torch.arange(n, dtype=torch.float32))
            out.append(msg)
        else:
            out.append(torch.arange(n, dtype=torch.float32))
    return out


def stamp_apart(js, bufs, msgs):
    res = []
    for (send, blocks, _, n, stamp, _), buf, msg in zip(js, bufs, msgs):
        if send:
            out = torch.empty(n, dtype=torch.float32)
            for so, do, r, c, sl, dl in blocks:
                out.as_strided((r, c), (dl, 1), do).copy_(buf.as_strided((r, c), (sl, 1), so))
            res.append((out, torch.tensor([int.from_bytes(stamp.numpy().tobytes(), "little",
                                                          signed=True)], dtype=torch.int64)))
        else:
            for so, do, r, c, sl, dl in blocks:
                buf.as_strided((r, c), (dl, 1), do).copy_(msg.as_strided((r, c), (sl, 1), so))
            res.append((buf, None))
    return res


def stamped(js, bufs, msgs, gather):
    res = []
    for (send, blocks, index, n, stamp, _), buf, msg in zip(js, bufs, msgs):
        if send:
            msg = dt._message(torch, 4 * n, "cpu")
            if gather:
                msg[:8] = stamp
                torch.index_select(buf, 0, index, out=msg[8:].view(torch.float32))
            else:
                dt._pack(buf, blocks, stamp, msg, torch.float32)
            res.append((msg[8:].view(torch.float32), msg[:8].view(torch.int64)))
        else:
            if gather:
                buf.index_copy_(0, index, msg[8:].view(torch.float32))
            else:
                dt._unpack(msg, blocks, buf, torch.float32)
            res.append((buf, None))
    return res


MODES = {"stamp apart": (stamp_apart, False),
         "stamp inside": (lambda js, bufs, msgs: stamped(js, bufs, msgs, False), True),
         "index gather": (lambda js, bufs, msgs: stamped(js, bufs, msgs, True), True)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    n, rounds = (64, 3) if a.quick else (256, 7)
    js = jobs(programs(n))
    sources = [torch.randn(s, dtype=torch.float32) for *_, s in js]
    msgs = {inside: received(js, inside) for inside in (False, True)}
    results = [f(js, [s.clone() for s in sources], msgs[inside]) for f, inside in MODES.values()]
    for other in results[1:]:  # the same bytes every way
        for (a1, s1), (a2, s2) in zip(results[0], other):
            assert torch.equal(a1, a2) and (s1 is None or torch.equal(s1, s2))
    times: dict[str, list[float]] = {k: [] for k in MODES}
    for _ in range(rounds):
        for name, (f, inside) in MODES.items():
            bufs = [s.clone() for s in sources]
            t0 = time.perf_counter()
            f(js, bufs, msgs[inside])
            times[name].append(time.perf_counter() - t0)
    sends = sum(1 for j in js if j[0])
    blocks = statistics.mean(len(j[1]) for j in js)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(js)} point-to-point ops ({sends} sends), {blocks:.1f} copy blocks per message, "
          f"{n} samples, hidden {HIDDEN}")
    print(f"messages sent per iteration: stamp apart {2 * sends}, stamp inside {sends}")
    print("pack + unpack, all ranks: " +
          ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in med.items()))
    print(f"index gather / stamp inside: {med['index gather'] / med['stamp inside']:.2f}")
    print(f"stamp apart / stamp inside: {med['stamp apart'] / med['stamp inside']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
