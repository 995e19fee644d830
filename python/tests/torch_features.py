"""Checks of disttrain.torch that need PyTorch (run by test_torch.py in a
subprocess, so the test process stays torch-free):

  torchrun --nproc-per-node 4 torch_features.py tied
      a backbone PP2 DP2 whose token embedding is tied to the LM head on the
      other stage (Runner(tied=...)), stage 0 also returning its own loss
      ((output, loss)) and its output per sample ({id: rows}); every
      parameter's gradient against one process on the same batch
  torchrun --nproc-per-node 4 torch_features.py accumulate
      the same batch in two halves: run(sync=False), then run(zero_grad=False)
  torchrun --nproc-per-node 2 torch_features.py wrong-rows
      stage 0 returns each sample's rows under another sample's id: the
      Runner fails naming the sample
  torchrun --nproc-per-node 2 torch_features.py reordered
      rank 1's program receives microbatch 1 before microbatch 0; with
      FifoP2P (NCCL's matching on gloo: tags ignored) it fails naming the
      pair instead of taking microbatch 0's bytes for microbatch 1's
  torchrun --nproc-per-node 2 torch_features.py field-errors
      links of several fields: an integer field marked differentiable, and
      a forward that leaves out a field, each fail naming what is wrong
  python torch_features.py dataloader
      BatchSampler as a DataLoader's batch_sampler with 2 workers:
      loader_batches pairs every microbatch's data with its own map
"""
from __future__ import annotations

import datetime
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import disttrain
from disttrain.torch import BatchSampler, FifoP2P, Runner, TorchP2P

VOCAB, DIM, BATCH, MICROBATCHES, SEED = 13, 6, 8, 2, 99


def tokens(i: int) -> torch.Tensor:
    """Sample i: 3..7 tokens (lengths differ from sample to sample)."""
    g = np.random.default_rng(SEED + i)
    return torch.as_tensor(g.integers(0, VOCAB, 3 + (i * 3) % 5))


def costs(ids: np.ndarray) -> np.ndarray:
    return np.array([[float(len(tokens(int(i))))] for i in ids])


class Model(nn.Module):
    """Embedding (tied with the head) -> stage 0 -> stage 1 -> head; an
    auxiliary loss on stage 0's output, the LM loss after the head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(SEED)
        self.embed = nn.Embedding(VOCAB, DIM)
        self.stage0 = nn.Linear(DIM, DIM)
        self.stage1 = nn.Linear(DIM, DIM)
        self.double()

    def first(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.stage0(self.embed(t)))
        return h, 0.1 * (h ** 2).sum() / BATCH

    def last(self, h: torch.Tensor, t: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        logits = torch.tanh(self.stage1(h)) @ head.T
        return nn.functional.cross_entropy(logits[:-1], t[1:], reduction="sum") / BATCH


def shapes(m):
    return [{"hidden": DIM, "rows": np.array([len(tokens(int(i))) for i in m["id"]])}]


def run_tied(accumulate: bool = False) -> int:
    rank = dist.get_rank()
    topo = disttrain.topology([{"name": "llm", "role": "backbone", "pp": 2, "dp": 2}])
    stage = topo["ranks"][rank]["chain_stage"]
    model = Model()
    mine = [model.embed.weight, model.stage0.weight, model.stage0.bias] if stage == 0 else \
        [model.embed.weight, model.stage1.weight, model.stage1.bias]

    def forward(j, x, ids):
        if stage == 0:
            outs, aux = {}, torch.zeros((), dtype=torch.float64)
            for i in ids:
                h, a = model.first(tokens(int(i)))
                outs[int(i)], aux = h, aux + a
            return outs, aux
        rows = [len(tokens(int(i))) for i in ids]
        hs = torch.split(x.view(-1, DIM), rows) if len(ids) else []
        return sum((model.last(h, tokens(int(i)), model.embed.weight) for h, i in zip(hs, ids)),
                   torch.zeros((), dtype=torch.float64))

    # accumulate: the batch in two halves, one run() each, summed before the DP sum.
    size = BATCH // 2 if accumulate else BATCH
    sampler = BatchSampler(range(BATCH), size, topo, rank, costs, MICROBATCHES,
                           reorder={"balance": "lpt"})
    runner = Runner(topo, forward, shapes, params=mine, dtype=torch.float64,
                    tied={"embedding": ([0, 1], model.embed.weight)})
    maps = [m for m, _ in sampler.batches()]
    if rank == 0:  # every rank's program, in the Runner's order, under NCCL's semantics
        for m in maps:
            disttrain.validate_world(topo, m, shapes(m), p2p="rendezvous")
    out = {"loss": 0.0}
    for n, batch_map in enumerate(maps):
        last = n + 1 == len(maps)
        out["loss"] += runner.run(batch_map, zero_grad=n == 0, sync=last)["loss"]
    # The serial model: the same batch in one process, one embedding.
    ref = Model()
    total = torch.zeros((), dtype=torch.float64)
    for i in range(BATCH):
        h, aux = ref.first(tokens(i))
        total = total + aux + ref.last(h, tokens(i), ref.embed.weight)
    total.backward()
    want = {"embed.weight": ref.embed.weight.grad}
    for n, p in ref.named_parameters():
        want.setdefault(n, p.grad)
    err = 0.0
    for n, p in model.named_parameters():
        if any(p is q for q in mine):
            w = want[n]
            err = max(err, float((p.grad - w).abs().max() / (1.0 + w.abs().max())))
    e = torch.tensor([err, out["loss"]], dtype=torch.float64)
    dist.all_reduce(e[:1], op=dist.ReduceOp.MAX)
    loss = e[1:].clone()
    dist.all_reduce(loss)
    if rank == 0:
        print(f"losses: {loss.item():.12f} vs serial {total.item():.12f}")
        print(f"max relative gradient error: {e[0].item():.3g}", flush=True)
    ok = e[0].item() <= 1e-12 and abs(loss.item() - total.item()) <= 1e-12 * abs(total.item())
    return 0 if ok else 1


def run_wrong_rows() -> int:
    rank = dist.get_rank()
    topo = disttrain.topology([{"name": "llm", "role": "backbone", "pp": 2, "dp": 1}])
    model = Model()

    def forward(j, x, ids):
        # The mistake: rows computed in ids order, filed under the next sample's id.
        hs = [model.first(tokens(int(i)))[0] for i in ids]
        keys = [int(i) for i in ids[1:]] + [int(ids[0])]
        return dict(zip(keys, hs))

    sampler = BatchSampler(range(BATCH), BATCH, topo, rank, costs, MICROBATCHES)
    batch_map, lists = next(sampler.batches())
    if rank == 0:
        print(f"microbatch 0 samples: {lists[0]}", flush=True)
    return rank0_fails(topo, batch_map, [(forward, shapes)])


def rank0_fails(topo, batch_map, cases) -> int:
    """Builds a Runner per ``(forward, shapes)`` case on every rank; rank 0
    (its first op is F: nothing to receive, so it fails alone) runs each
    and prints the InvalidArgument it raises. 0 if every run raised."""
    status = 0
    for forward, shapes_of in cases:
        runner = Runner(topo, forward, shapes_of, params=[], dtype=torch.float64)
        if dist.get_rank() != 0:
            continue
        try:
            runner.run(batch_map)
            print("no error", flush=True)
            status = 1
        except disttrain.InvalidArgument as e:
            print(f"error at {e.where}: {e}", flush=True)
    dist.barrier()
    return status


def run_field_errors() -> int:
    _, topo, batch_map, _ = frozen_pp2()

    def fields(differentiable_ids: bool):
        def shapes_of(m):
            n = len(m["id"])
            return [{"fields": [
                {"name": "hidden", "hidden": DIM, "rows": np.full(n, 2)},
                {"name": "ids", "hidden": 1, "rows": np.ones(n, dtype=np.int64),
                 "dtype": torch.int64, "differentiable": differentiable_ids}]}]
        return shapes_of

    def forward(j, x, ids):  # leaves out "ids"
        if x is None:
            return {"hidden": {int(i): torch.zeros((2, DIM), dtype=torch.float64) for i in ids}}
        return x["hidden"].sum()

    return rank0_fails(topo, batch_map, [(forward, fields(True)), (forward, fields(False))])


def frozen_pp2() -> tuple:
    """A frozen PP2 backbone (forward only: rank 0 sends, rank 1 receives):
    (rank, topology, the first batch's map, this rank's sample lists)."""
    rank = dist.get_rank()
    topo = disttrain.topology([{"name": "llm", "role": "backbone", "pp": 2, "dp": 1,
                                "trainable": False}])
    sampler = BatchSampler(range(BATCH), BATCH, topo, rank, costs, MICROBATCHES)
    batch_map, lists = next(sampler.batches())
    return rank, topo, batch_map, lists


def forward_pp2(j, x, ids):
    """Stage 0: two rows of value id per sample; stage 1: their sum."""
    if x is None:
        return {int(i): torch.full((2, DIM), float(i), dtype=torch.float64) for i in ids}
    return x.sum()


def fails_as(runner, batch_map, expected) -> int:
    """0 if ``runner.run`` raises a CommError or Timeout that ``expected``
    accepts (printed as "rank R: <type>: <message>"), else 1."""
    rank = dist.get_rank()
    try:
        runner.run(batch_map)
    except (disttrain.CommError, disttrain.Timeout) as e:
        print(f"rank {rank}: {type(e).__name__}: {e}", flush=True)
        return 0 if expected(e) else 1
    print(f"rank {rank}: no error", flush=True)
    return 1


def run_disagreement() -> int:
    # A frozen PP2 backbone (forward only: rank 0 sends, rank 1 receives). Rank 1
    # binds its program from other shapes with the same message sizes (two
    # samples of one microbatch with 1 and 3 rows instead of 2 and 2): every
    # message arrives with the right byte count but the sender's plan stamp, so
    # rank 1 must fail at its first receive instead of using rank 0's bytes.
    rank, topo, batch_map, lists = frozen_pp2()
    a, b = (int(i) for i in lists[0][:2])  # two samples of microbatch 0

    def flat(m):
        rows = np.full(len(m["id"]), 2)
        if rank == 1:
            for i, r in ((a, 1), (b, 3)):
                rows[list(m["id"]).index(i)] = r
        return [{"hidden": DIM, "rows": rows}]


    # The sender's next send is never received: its batch times out.
    runner = Runner(topo, forward_pp2, flat, params=[], dtype=torch.float64,
                    p2p=TorchP2P(timeout=5))
    return fails_as(runner, batch_map, lambda e: isinstance(
        e, disttrain.CommError if rank == 1 else disttrain.Timeout))


def run_reordered() -> int:
    rank, topo, batch_map, _ = frozen_pp2()

    def flat(m):
        return [{"hidden": DIM, "rows": np.full(len(m["id"]), 2)}]

    class Reordered(Runner):
        def bind(self, m):
            p = super().bind(m)
            if self.rank == 1:  # swap the receives of microbatches 0 and 1
                a, b = [i for i, k in enumerate(p["kind"])
                        if disttrain.OP_KINDS[k] == "recv_act" and p["elements"][i] > 0][:2]
                for key in ("microbatch", "tag", "message", "bytes", "elements", "stamp"):
                    p[key][[a, b]] = p[key][[b, a]]
                p["blocks"][a], p["blocks"][b] = p["blocks"][b], p["blocks"][a]
            return p

    runner = Reordered(topo, forward_pp2, flat, params=[], dtype=torch.float64, p2p=FifoP2P(5))
    # The receiver names the pair; the sender's send is never received.
    return fails_as(runner, batch_map, lambda e: (
        rank == 1 and isinstance(e, disttrain.CommError) and "rank 0" in str(e)
        and "rank 1" in str(e)) or (rank == 0 and isinstance(e, disttrain.Timeout)
                                    and "rank 0 -> rank 1" in str(e)))


def run_dataloader() -> int:
    topo = disttrain.topology([{"name": "enc", "role": "encoder", "dp": 2},
                               {"name": "llm", "role": "backbone", "pp": 2, "dp": 1}])

    def costs2(ids):
        c = costs(ids)
        return np.hstack([c, c * 2])

    class Indices(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            return int(i)

    order = list(np.random.default_rng(3).permutation(64))
    sampler = BatchSampler(order, 16, topo, 1, costs2, 4)
    loader = torch.utils.data.DataLoader(Indices(), batch_sampler=sampler, num_workers=2,
                                         collate_fn=list)
    batches = wrong_by_newest = 0
    for it, (m, micro) in enumerate(sampler.loader_batches(loader)):
        want = sampler.mine(m)
        assert [sorted(int(i) for i in m["id"])] == [sorted(order[16 * it:16 * (it + 1)])], it
        for j in range(4):
            assert micro[j] == want[j], (it, j, micro[j], want[j])
            wrong_by_newest += micro[j] != sampler.mine(sampler.map)[j]
        batches += 1
    print(f"dataloader: {batches} global batches, every microbatch matched its map; "
          f"{wrong_by_newest} of {4 * batches} would not match BatchSampler.map (the newest)")
    return 0 if batches == 4 else 1


def main() -> int:
    mode = sys.argv[1]
    torch.set_num_threads(1)
    if mode == "dataloader":
        return run_dataloader()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    if mode in ("tied", "accumulate"):
        status = run_tied(accumulate=mode == "accumulate")
        dist.barrier()  # every rank past its last message before teardown (as torch_mllm)
    elif mode == "disagreement":
        status = run_disagreement()
    elif mode == "reordered":
        status = run_reordered()
    elif mode == "field-errors":
        status = run_field_errors()
    else:
        status = run_wrong_rows()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
