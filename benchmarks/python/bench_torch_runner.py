#!/usr/bin/env python3
"""disttrain.torch.Runner against torch.distributed.pipelining on the same
backbone-only pipeline, in the same run (issue 39, item 7).

    torchrun --standalone --nproc-per-node 2 benchmarks/python/bench_torch_runner.py [--quick]
    torchrun --standalone --nproc-per-node 4 benchmarks/python/bench_torch_runner.py --pp 4

Layout: a backbone of `--pp` stages (PP = world size), DP 1, gloo on CPU, one
thread per rank. Model: `--layers` Linear(H, H) + tanh layers per stage (H =
`--hidden`), fixed shapes: `--microbatches` microbatches of `--samples`
samples of `--rows` rows each (float32); the last stage's loss is the sum of
squares of its output. Both sides run 1F1B over the same microbatches with
the same modules (copies of one initialisation):

  torch.distributed.pipelining   PipelineStage + Schedule1F1B, step() on the
                                 whole batch (it splits the microbatches)
  disttrain.torch.Runner         bind_rank of the batch's sample map (every
                                 iteration, as a trainer does), then run()

Iterations alternate between the two (A B A B ...), each timed between two
barriers on every rank; reported: the median over `--iterations` of each
after `--warmup`, and per iteration the point-to-point messages rank 0
issues (the ops of its batch_isend_irecv calls, counted by wrapping it). The gradients of both are compared (they
must agree to 1e-5 relative: same math, other summation order). The last
line reads `runner / torch.distributed.pipelining: X` (median ratio).
`--trace PATH` also writes the runner's last iteration, every rank, as a
Perfetto trace (Runner(record=True) + disttrain.trace_json).
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import disttrain
from disttrain.torch import Runner

COUNT = {"p2p": 0}


def _counting(fn, ops_of):
    def wrapped(*args, **kwargs):
        COUNT["p2p"] += ops_of(*args, **kwargs)
        return fn(*args, **kwargs)
    return wrapped


def count_p2p() -> None:
    """Counts the point-to-point messages this process issues through
    torch.distributed.batch_isend_irecv (both sides send every message so;
    isend / irecv themselves stay unwrapped: P2POp checks their identity)."""
    dist.batch_isend_irecv = _counting(dist.batch_isend_irecv, lambda ops, *a, **k: len(ops))


def stage_module(hidden: int, layers: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden), nn.Tanh()]
    return nn.Sequential(*mods)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="smaller and fewer iterations")
    ap.add_argument("--trace", help="write the runner's last iteration as a Perfetto trace "
                                    "(JSON) to this path")
    args = ap.parse_args()
    if args.quick:
        args.hidden, args.iterations, args.warmup = 128, 4, 1
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, pp = dist.get_rank(), dist.get_world_size()
    if pp < 2:
        print("bench_torch_runner: needs 2 or more ranks (torchrun --nproc-per-node 2)")
        return 2
    H, R, M, S = args.hidden, args.rows, args.microbatches, args.samples
    n = M * S
    data = torch.randn(n, R, H, generator=torch.Generator().manual_seed(7))
    module = stage_module(H, args.layers, 100 + rank)
    ours = copy.deepcopy(module)
    last = rank == pp - 1

    # torch.distributed.pipelining
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    example = torch.empty(S, R, H)
    stage = PipelineStage(module, rank, pp, torch.device("cpu"), input_args=(example,))
    sched = Schedule1F1B(stage, M, loss_fn=lambda out, _: (out ** 2).sum(), scale_grads=False)
    target = torch.zeros(n, R, H)

    def torch_step() -> None:
        module.zero_grad(set_to_none=True)
        if rank == 0:
            sched.step(data)
        elif last:
            sched.step(target=target)
        else:
            sched.step()

    # disttrain.torch.Runner: the same 1F1B over a map of equal cells.
    topo = disttrain.topology([{"name": "llm", "role": "backbone", "pp": pp, "dp": 1}])
    costs = np.ones((n, 1))
    ids = np.arange(n)

    def forward(j, x, cell):
        xin = data[torch.from_numpy(cell.astype(np.int64))] if x is None else x.view(-1, R, H)
        out = ours(xin)
        return (out ** 2).sum() if last else out

    def shapes(m):
        return [{"hidden": H, "rows": np.full(len(m["id"]), R)} for _ in range(pp - 1)]

    runner = Runner(topo, forward, shapes, params=ours.parameters(), dtype=torch.float32,
                    record=args.trace is not None)
    last_run: dict = {}

    def runner_step() -> None:
        m = disttrain.reorder(costs, 1, M, ids=ids, balance="lpt")
        last_run["map"], last_run["out"] = m, runner.run(m)

    times: dict[str, list[float]] = {"torch": [], "runner": []}
    messages: dict[str, int] = {}
    count_p2p()
    for it in range(args.warmup + args.iterations):
        for name, step in (("torch", torch_step), ("runner", runner_step)):
            dist.barrier()
            COUNT["p2p"] = 0
            t0 = time.perf_counter()
            step()
            dist.barrier()
            dt = time.perf_counter() - t0
            messages[name] = COUNT["p2p"]
            if it >= args.warmup:
                times[name].append(dt)
    # Same math: the gradients of both sides (the cells are 4 consecutive
    # samples in both, so each microbatch holds the same samples).
    err = 0.0
    for a, b in zip(module.parameters(), ours.parameters()):
        err = max(err, float((a.grad - b.grad).abs().max() / (1e-12 + a.grad.abs().max())))
    e = torch.tensor([err])
    dist.all_reduce(e, op=dist.ReduceOp.MAX)
    med = {k: statistics.median(v) for k, v in times.items()}
    if args.trace is not None:  # every rank's events of the last iteration, on rank 0
        gathered: list = [None] * pp
        dist.all_gather_object(gathered, last_run["out"]["events"])
        if rank == 0:
            m = last_run["map"]
            elem = [dict(s, elem_size=4) for s in shapes(m)]
            with open(args.trace, "w") as f:
                f.write(disttrain.trace_json(topo, m, elem, [e for ev in gathered for e in ev]))
    if rank == 0:
        print(f"bench_torch_runner: PP{pp} DP1 on gloo/CPU, {M} microbatches x {S} samples x "
              f"{R} rows x {H} hidden (float32), {args.layers} Linear+tanh layers per stage; "
              f"median of {args.iterations} alternating iterations after {args.warmup}")
        for k, label in (("torch", "torch.distributed.pipelining (Schedule1F1B)"),
                         ("runner", "disttrain.torch.Runner (bind + run)")):
            lo, hi = min(times[k]), max(times[k])
            print(f"  {label:<46} {1e3 * med[k]:9.2f} ms/iteration (min {1e3 * lo:.2f}, max "
                  f"{1e3 * hi:.2f})  {messages[k]} p2p messages on rank 0")
        print(f"  max relative gradient difference: {e.item():.3g}")
        if args.trace is not None:
            print(f"  the runner's last iteration: {args.trace} (open in ui.perfetto.dev)")
        print(f"runner / torch.distributed.pipelining: {med['runner'] / med['torch']:.3f}")
    # Every rank past its last message before any tears its process group down
    # (gloo aborted one rank at exit, "terminate called without an active
    # exception", once in the many runs of 2026-12-06 without it).
    dist.barrier()
    dist.destroy_process_group()
    return 0 if e.item() <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
