"""A small multimodal model in PyTorch, trained disaggregated with disttrain:
a ViT-like patch encoder -> a decoder backbone in pipeline stages -> a
generator head, each module with its own data parallelism, over
torch.distributed (gloo, CPU). Per batch: the reorderer's sample map (the
same on every rank, disttrain.torch.BatchSampler), this rank's bound program
(disttrain.bind_rank), run by disttrain.torch.Runner with the modules below
as the forward/backward callbacks.

  torchrun --nproc-per-node 7 examples/python/torch_mllm.py --enc-dp 2 --bb-pp 2 --bb-dp 1 \\
      --gen-dp 3 --check
  torchrun --nproc-per-node 7 examples/python/torch_mllm.py --check      # the planner's layout

Flags: --enc-dp --bb-pp --bb-dp --gen-dp (omitted: the planner's layout for
the world size, TP 1), --enc-tp --bb-tp --gen-tp (default 1; the modules
have no tensor-parallel math: the TP ranks of a replica compute the same
values from the whole input the bound program's TP fan-out gives each, so
TP > 1 exercises the routes, not a TP speed-up),
--virtual-stages V (the backbone runs interleaved 1F1B, V model chunks per
rank; --microbatches a multiple of --bb-pp), --microbatches, --batch,
--iterations, --check (iteration 0's gradients of
every parameter vs a single-process run on the same batch, float64; fails
above 1e-12; rank 0 also checks that every rank's program, as the Runner
issues it, cannot deadlock under NCCL's semantics: disttrain.validate_world),
--float32 (limit 1e-5), --bf16 (bfloat16 weights, activations and messages;
limit 5e-2), --zero-bubble (ZB-H1: B and W as separate ops),
--fifo (NCCL's message matching on gloo: tags ignored,
a pair's messages in issue order, a send complete once received;
disttrain.torch.FifoP2P), --fields (every link carries three named tensors:
"hidden", the samples' "text" tokens (int64) and their "lengths" (int32:
hidden rows and text tokens per sample); the backbone and the generator then
split and embed what they receive, without reading the dataset's text or
recomputing the lengths).
"""
from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any, Optional

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import disttrain
from disttrain.torch import BatchSampler, FifoP2P, Runner

PATCH_DIM, ENC_DIM, DIM, LAYERS, VOCAB, OUT_DIM = 6, 16, 16, 4, 32, 4
MAX_PATCHES, SEED = 8, 1234


# ---- data: one deterministic sample per id ------------------------------------

def sample(i: int, dtype: torch.dtype) -> dict:
    """Images (1-3, each 2..8 patches), 3..9 text tokens, a target per position."""
    g = np.random.default_rng(SEED + i)
    images = [torch.as_tensor(g.standard_normal((int(g.integers(2, MAX_PATCHES + 1)), PATCH_DIM)),
                              dtype=dtype) for _ in range(int(g.integers(1, 4)))]
    text = torch.as_tensor(g.integers(0, VOCAB, int(g.integers(3, 10))))
    seq = len(images) + len(text)
    return {"images": images, "text": text,
            "target": torch.as_tensor(g.standard_normal((seq, OUT_DIM)), dtype=dtype)}


def costs_by(ids: np.ndarray, kit: Any) -> np.ndarray:
    """The reorderer's costs, one row per sample: `kit.sample_costs` of each."""
    return np.array([kit.sample_costs(kit.sample(int(i), torch.float64)) for i in ids])


def sample_costs(s: dict) -> tuple[float, float, float]:
    """Encoder ~ patches^2, backbone and generator ~ tokens."""
    p = [len(x) for x in s["images"]]
    seq = len(p) + len(s["text"])
    return (sum(q * (1 + q) for q in p), seq, 1.0 + 0.1 * seq)


def costs(ids: np.ndarray) -> np.ndarray:
    return costs_by(ids, sys.modules[__name__])


# ---- the model ------------------------------------------------------------------

def layer(dim: int) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=2 * dim, dropout=0.0,
                                      batch_first=True)


class Encoder(nn.Module):
    """ViT-like: patch embedding + position, one transformer layer, mean pool,
    projection to the backbone's width: one row per image."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(PATCH_DIM, ENC_DIM)
        self.pos = nn.Parameter(0.02 * torch.randn(MAX_PATCHES, ENC_DIM))
        self.block = layer(ENC_DIM)
        self.proj = nn.Linear(ENC_DIM, DIM)

    def forward(self, images: list) -> torch.Tensor:
        rows = [self.block((self.embed(p) + self.pos[:len(p)])[None])[0].mean(0) for p in images]
        return self.proj(torch.stack(rows))


class BackboneStage(nn.Module):
    """Causal decoder layers [first, last); stage 0 embeds the text after the images."""

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM) if first == 0 else None
        self.blocks = nn.ModuleList(layer(DIM) for _ in range(first, last))

    def forward(self, h: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            h = torch.cat([h, self.embed(text)])
        mask = nn.Transformer.generate_square_subsequent_mask(len(h), dtype=h.dtype)
        for b in self.blocks:
            h = b(h[None], src_mask=mask)[0]
        return h


class Generator(nn.Module):
    """A head regressing each position's target."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, OUT_DIM))

    def forward(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((self.head(h) - target) ** 2).sum()


def stage_layers(pp: int, layers: Optional[list] = None, total: int = LAYERS
                 ) -> list[tuple[int, int]]:
    """Layers [first, last) of each backbone stage (or virtual stage: pp counts
    them): `layers` per stage, else an even split of `total`."""
    if not layers:
        return [(s * total // pp, (s + 1) * total // pp) for s in range(pp)]
    ends = np.cumsum([0] + list(layers))
    return [(int(ends[s]), int(ends[s + 1])) for s in range(pp)]


class Pipeline(nn.Module):
    """An encoder, backbone stages and a generator, built identically on every
    rank (seeded per module); subclasses name the three classes and the seed."""
    encoder_class: Any
    stage_class: Any
    generator_class: Any
    seed: int

    def __init__(self, stages: list[tuple[int, int]], dtype: torch.dtype) -> None:
        super().__init__()
        torch.manual_seed(self.seed)
        self.encoder = self.encoder_class()
        torch.manual_seed(self.seed + 1)
        self.stages = nn.ModuleList(self.stage_class(a, b) for a, b in stages)
        torch.manual_seed(self.seed + 2)
        self.generator = self.generator_class()
        self.to(dtype)

    def loss(self, batch: list[dict]) -> torch.Tensor:
        total = 0
        for s in batch:
            h = self.encoder(s["images"])
            for st in self.stages:
                h = st(h, s["text"])
            total = total + self.generator(h, s["target"])
        return total / len(batch)


class Model(Pipeline):
    """This file's model."""
    encoder_class, stage_class, generator_class, seed = Encoder, BackboneStage, Generator, SEED


# ---- layout -----------------------------------------------------------------------

def layout(args: argparse.Namespace, world: int, kit: Any) -> dict:
    flags = (args.enc_dp, args.bb_pp, args.bb_dp, args.gen_dp)
    tp = {"encoder": args.enc_tp, "backbone": args.bb_tp, "generator": args.gen_tp}
    if any(f is None for f in flags):
        if any(f is not None for f in flags) or not hasattr(kit, "planned_topology"):
            sys.exit("give all of --enc-dp --bb-pp --bb-dp --gen-dp"
                     + (", or none (the planner's)" if hasattr(kit, "planned_topology") else ""))
        mods = kit.planned_topology(world, args)
    else:
        enc, pp, bb, gen = flags
        mods = [{"name": "encoder", "role": "encoder", "dp": enc},
                {"name": "backbone", "role": "backbone", "pp": pp, "dp": bb},
                {"name": "generator", "role": "generator", "dp": gen}]
    for m in mods:
        m["tp"] = tp[m["role"]]
        if m["role"] == "backbone" and args.virtual_stages > 1:
            m["chunks"] = args.virtual_stages
            m.pop("layers", None)
    return disttrain.topology(mods)


def planned_topology(world: int, args: argparse.Namespace) -> list[dict]:
    """The planner's layout (disttrain.plan) for `world` ranks: this model and
    its samples as a scenario, a CPU rank standing for a GPU (rough figures:
    2 GFLOP/s, 2 GB/s links), TP 1, one stage per side module, every module
    on its own ranks (what this trainer runs)."""
    vit = {"type": "vit", "image_size": MAX_PATCHES, "patch_size": 1, "layers": 1,
           "hidden": ENC_DIM, "heads": 2, "mlp": 2 * ENC_DIM, "channels": PATCH_DIM,
           "class_token": False, "qkv_bias": True, "max_image_size": MAX_PATCHES}
    llm = {"type": "llm", "layers": LAYERS, "hidden": DIM, "heads": 2, "kv_heads": 2,
           "mlp": 2 * DIM, "vocab": VOCAB, "max_seq": 12, "gated_mlp": False, "qkv_bias": True,
           "tied_embeddings": False}
    dit = {"type": "diffusion", "kind": "dit", "resolution": 1, "latent_downsample": 1,
           "latent_channels": OUT_DIM, "patch_size": 1, "layers": 1, "hidden": 2 * DIM,
           "heads": 1, "mlp": 2 * DIM, "learn_sigma": False}
    records = []
    for i in range(args.batch * args.iterations):
        s = sample(i, torch.float64)
        records.append({"text_tokens": len(s["text"]), "images": [[1, len(p)] for p in s["images"]],
                        "generated": [[1, 1]]})
    gpu = {"name": "cpu core", "peak_bf16_tflops": 2e-3, "peak_fp32_tflops": 2e-3,
           "hbm_bytes": 1e9, "hbm_bandwidth_bytes_per_s": 5e9}
    eff = {"e_max": 1.0, "flops_half": 4e3, "tp_penalty": 0.0}
    scenario = {
        "name": "torch_mllm",
        "model": {"name": "torch_mllm", "projector_tokens_per_image": 1,
                  "projector_patch_ratio": 1, "generator_condition_tokens": 0,
                  "modules": [{"name": "encoder", "role": "encoder", "arch": vit},
                              {"name": "backbone", "role": "backbone", "arch": llm},
                              {"name": "generator", "role": "generator", "arch": dit}]},
        "data": {"name": "torch_mllm synthetic", "records": records},
        "cluster": {"name": "cpu ranks", "gpu": gpu, "num_gpus": world, "gpus_per_node": world,
                    "intra_node_bandwidth_bytes_per_s": 2e9, "intra_node_latency_s": 5e-6,
                    "inter_node_bandwidth_bytes_per_s": 2e9, "inter_node_latency_s": 5e-6},
        "global_batch_size": args.batch,
        "planner": {"tp_candidates": [1], "max_side_pp": 1, "include_monolithic": False,
                    "include_mixed": False, "search_recompute": False, "max_virtual_stages": 1,
                    "max_backbone_pp": min(LAYERS, world)},
        "cost": {"efficiency": {"encoder": eff, "backbone": eff, "generator": eff},
                 "memory_reserve_bytes": 0},
    }
    plan = disttrain.plan(scenario)["plan"]
    if args.microbatches is None:
        args.microbatches = plan["num_microbatches"]
    bb = next(m for m in plan["modules"] if m["role"] == "backbone")
    args.bb_layers = bb.get("layers") or None
    return disttrain.topology_of(plan)["modules"]


# ---- the trainer --------------------------------------------------------------------

def main(kit: Any = None) -> int:
    """Trains the model of `kit` (a module with DIM, LAYERS, sample, costs,
    Model and, for the planner's layout, planned_topology; this one's by
    default: examples/python/hf_mllm.py passes its own)."""
    kit = kit if kit is not None else sys.modules[__name__]
    ap = argparse.ArgumentParser(description=kit.__doc__.split("\n\n")[0])
    for f in ("--enc-dp", "--bb-pp", "--bb-dp", "--gen-dp", "--microbatches"):
        ap.add_argument(f, type=int)
    for f in ("--enc-tp", "--bb-tp", "--gen-tp"):
        ap.add_argument(f, type=int, default=1)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--bf16", action="store_true",
                    help="bfloat16 model and messages (--check: limit 5e-2)")
    ap.add_argument("--virtual-stages", type=int, default=1,
                    help="model chunks per backbone rank (interleaved 1F1B)")
    ap.add_argument("--zero-bubble", action="store_true",
                    help="ZB-H1's order, B and W apart (Runner zero_bubble)")
    ap.add_argument("--same-batch", action="store_true",
                    help="every iteration on the first batch (a loss that must fall)")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    ap.add_argument("--fields", action="store_true",
                    help="links carry hidden, text (int64) and lengths (int32) fields")
    ap.add_argument("--fifo", action="store_true",
                    help="NCCL's matching on gloo: tags ignored, a pair's messages in issue "
                         "order, a send done once received (disttrain.torch.FifoP2P)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    # A short deadline: a rank waiting on a peer that died fails instead of hanging.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = (torch.bfloat16 if args.bf16 else torch.float32 if args.float32
             else torch.float64)
    topo = layout(args, world, kit)
    if args.microbatches is None:
        args.microbatches = 4
    if topo["world_size"] != world:
        sys.exit(f"the layout {topo['describe']} needs {topo['world_size']} ranks, "
                 f"torchrun started {world}")
    me = topo["ranks"][rank]
    role = topo["modules"][me["module"]]["role"]
    pp = next(m["pp"] for m in topo["modules"] if m["role"] == "backbone")
    V = args.virtual_stages
    # Virtual stage u = c * pp + s of the backbone holds chunk c of stage s
    # (Megatron-LM's assignment); one per stage without interleaving.
    stages = (stage_layers(pp * V, total=max(kit.LAYERS, pp * V)) if V > 1
              else stage_layers(pp, getattr(args, "bb_layers", None), kit.LAYERS))
    model = kit.Model(stages, dtype)
    chunks = ([model.stages[c * pp + me["stage"]] for c in range(V)] if role == "backbone"
              else [])
    part = (model.encoder if role == "encoder" else model.generator if role == "generator"
            else nn.ModuleList(chunks))
    samples: dict[int, dict] = {}

    def get(i: int) -> dict:
        if i not in samples:
            samples[i] = kit.sample(i, dtype)
        return samples[i]

    def cat(ts: list, dt=dtype) -> torch.Tensor:
        return torch.cat(ts) if ts else torch.zeros(0, dtype=dt)

    def forward(j: int, x, ids: np.ndarray, chunk: int = 0):
        """F on this rank's samples `ids`. With --fields the input is {hidden,
        text, lengths}, so what a stage needs from the sample (its rows, its
        tokens) comes with the activation; without, from the dataset."""
        batch = [get(int(i)) for i in ids]
        if role == "encoder":
            hs = [part(s["images"]) for s in batch]
            text = [s["text"] for s in batch]
        elif args.fields:
            lengths = x["lengths"].view(-1, 2).tolist()
            hs = list(torch.split(x["hidden"].view(-1, kit.DIM), [r for r, _ in lengths]))
            text = list(torch.split(x["text"], [t for _, t in lengths]))
        else:
            first = me["stage"] == 0 and chunk == 0 and role == "backbone"
            rows = [len(s["images"]) + (0 if first else len(s["text"])) for s in batch]
            hs = list(torch.split(x.view(-1, kit.DIM), rows)) if batch else []
            text = [s["text"] for s in batch]
        if role == "generator":
            return sum((part(hi, s["target"]) for hi, s in zip(hs, batch)),
                       torch.zeros((), dtype=dtype)) / args.batch
        if role == "backbone":
            hs = [chunks[chunk](hi, ti) for hi, ti in zip(hs, text)]
        if not args.fields:
            return cat(hs)
        return {"hidden": cat(hs), "text": cat(text, torch.int64),
                "lengths": torch.tensor([[len(h), len(t)] for h, t in zip(hs, text)],
                                        dtype=torch.int32).reshape(-1)}

    def shapes(map):
        ss = [get(int(i)) for i in map["id"]]
        out = []
        for c, _ in topo["path"][:-1]:  # link v leaves virtual stage v (chain stage c)
            enc = topo["modules"][topo["chain"][c][0]]["role"] == "encoder"
            rows = np.array([len(s["images"]) + (0 if enc else len(s["text"])) for s in ss])
            if not args.fields:
                out.append({"hidden": kit.DIM, "rows": rows})
                continue
            out.append({"fields": [
                {"name": "hidden", "hidden": kit.DIM, "rows": rows},
                {"name": "text", "hidden": 1, "rows": np.array([len(s["text"]) for s in ss]),
                 "dtype": torch.int64, "split": "rows", "differentiable": False},
                {"name": "lengths", "hidden": 2, "rows": np.ones(len(ss), dtype=np.int64),
                 "dtype": torch.int32, "differentiable": False}]})
        return out

    order = (list(range(args.batch)) * args.iterations if args.same_batch
             else range(args.batch * args.iterations))
    sampler = BatchSampler(order, args.batch, topo, rank, kit.costs, args.microbatches)
    params = ([list(m.parameters()) for m in chunks] if role == "backbone" and V > 1
              else part.parameters())
    runner = Runner(topo, forward, shapes, params=params, dtype=dtype,
                    p2p=FifoP2P(timeout=60) if args.fifo else None,
                    zero_bubble=args.zero_bubble)
    opt = torch.optim.Adam(part.parameters(), lr=args.lr)
    if rank == 0:
        print(f"world {world} ranks: {topo['describe']}; {args.batch} samples in "
              f"{args.microbatches} microbatches per iteration", flush=True)
    status = 0
    for it, (batch_map, _) in enumerate(sampler.batches()):
        if it == 0 and args.check and rank == 0:
            rep = disttrain.validate_world(topo, batch_map, shapes(batch_map),
                                           zero_bubble=args.zero_bubble, p2p="rendezvous")
            print(f"every rank's program under NCCL's rendezvous semantics: no deadlock "
                  f"({rep['messages']} messages)", flush=True)
        out = runner.run(batch_map)
        loss = torch.tensor([out["loss"] if me["tp_rank"] == 0 else 0.0], dtype=torch.float64)
        dist.all_reduce(loss)
        if rank == 0:
            w_ops = sum(1 for k in out["program"]["kind"] if disttrain.OP_KINDS[k] == "W")
            print(f"iter {it}  loss {loss.item():.6f}  {out['messages']} messages on rank 0"
                  + (f", {w_ops} W ops" if args.zero_bubble else ""), flush=True)
        if it == 0 and args.check:
            ref = kit.Model(stages, dtype)
            ref.loss([get(int(i)) for i in range(args.batch)]).backward()
            want = dict((n, p.grad) for n, p in ref.named_parameters())
            prefix = ("encoder." if role == "encoder" else "generator." if role == "generator"
                      else "")
            err = 0.0
            for n, p in part.named_parameters():
                if role == "backbone":  # "c.<name>": chunk c is virtual stage c * pp + stage
                    c, rest = n.split(".", 1)
                    n = f"stages.{int(c) * pp + me['stage']}.{rest}"
                w = want[prefix + n]
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                err = max(err, float((g - w).abs().max() / (1.0 + w.abs().max())))
            e = torch.tensor([err], dtype=torch.float64)
            dist.all_reduce(e, op=dist.ReduceOp.MAX)
            limit = 5e-2 if args.bf16 else 1e-5 if args.float32 else 1e-12
            status = int(e.item() > limit)
            if rank == 0:
                print(f"max relative gradient error: {e.item():.3g}\ncheck (limit {limit:g}): "
                      f"{'OK' if status == 0 else 'MISMATCH'}", flush=True)
        opt.step()
    # Every rank past its last message before any tears its process group down
    # (gloo aborted one rank at exit, "terminate called without an active
    # exception", once in the many runs of 2026-12-06 without it).
    dist.barrier()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
