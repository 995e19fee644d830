"""disttrain for PyTorch trainers: a batch sampler that gives each rank its
samples of each microbatch from the one global sample map, and a runner that
executes a rank's bound program over ``torch.distributed`` point-to-point
(docs/python.md, "PyTorch").

torch is imported when a :class:`Runner` is built, not when this module is:
``BatchSampler`` works without it.

>>> from disttrain.torch import BatchSampler, Runner
>>> sampler = BatchSampler(range(len(ds)), 12, topo, rank, costs, microbatches=4)
>>> runner = Runner(topo, forward, shapes, params=stage.parameters(), dtype=torch.float64)
>>> for batch_map, mine in sampler.batches():      # mine[j]: my dataset indices of microbatch j
...     out = runner.run(batch_map)                  # F/B via `forward`, sends/recvs, DP reduction
...     opt.step(); opt.zero_grad()

With a ``torch.utils.data.DataLoader`` (``batch_sampler=sampler``, any
``num_workers``), take each global batch's map with its data from
:meth:`BatchSampler.loader_batches`: the sampler runs ahead of the loader.
"""
from __future__ import annotations

import datetime
import time
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as _np

import disttrain as _dt

__all__ = ["BatchSampler", "Runner", "TorchP2P", "FifoP2P", "module_of"]

_K = _dt.OpKind


def _torch():
    try:
        import torch
        import torch.distributed
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise _dt.Unsupported(f"disttrain: unsupported at disttrain.torch: PyTorch is not "
                              f"installed ({e})", "unsupported", "disttrain.torch") from None
    return torch


def module_of(topo: Mapping[str, Any], rank: int) -> tuple[int, int]:
    """(reorder module index, DP replica) of global ``rank``: the column of the
    sample map and the replica whose samples the rank processes."""
    r = topo["ranks"][rank]
    return topo["owning_modules"].index(r["module"]), r["replica"]


#: Bytes of the plan stamp at the head of every message (an int64).
_STAMP_BYTES = 8


def _message(torch: Any, payload_bytes: int, device: Any) -> Any:
    """A message buffer: the stamp's 8 bytes, then the payload (uint8, so one
    message carries both; the payload's offset 8 suits every dtype's alignment)."""
    return torch.empty(_STAMP_BYTES + payload_bytes, dtype=torch.uint8, device=device)


def _block(t: Any, offset: int, rows: int, cols: int, ld: int) -> Any:
    """The (rows, cols) view of flat contiguous ``t`` a copy block names."""
    return t.as_strided((rows, cols), (ld, 1), t.storage_offset() + offset)


def _parts(msg: Any, parts: list, blocks: list, fields: list) -> Iterator[tuple]:
    """Per field of a message with elements in it: (its field index, its part
    of the payload as a flat tensor of the field's dtype, its copy blocks).
    ``parts``: the op's ``(byte offset, elements, blocks)`` per field (the
    program's ``parts``), ``fields``: the link's fields (with ``dtype``)."""
    b0 = 0
    for k, (off, n, nb) in enumerate(parts):
        if n:
            dt = fields[k]["dtype"]
            at = _STAMP_BYTES + off
            yield k, msg[at:at + n * fields[k]["elem_size"]].view(dt), blocks[b0:b0 + nb]
        b0 += nb


def _pack(srcs: list, blocks: list, parts: list, fields: list, stamp: Any, msg: Any) -> None:
    """A send: the stamp (its 8 bytes, a uint8 tensor), then each field's copy
    blocks from its buffer in ``srcs`` into its part of the payload. A copy
    per block (a few per message, each rows of a sample): faster than one
    index gather of the same elements (benchmarks/python/bench_runner_pack.py)."""
    msg[:_STAMP_BYTES] = stamp
    for k, out, bs in _parts(msg, parts, blocks, fields):
        src = srcs[k]
        for so, do, rows, cols, sl, dl in bs:
            _block(out, do, rows, cols, dl).copy_(_block(src, so, rows, cols, sl))


def _unpack(msg: Any, blocks: list, parts: list, fields: list, dsts: list) -> None:
    """A receive: each field's part of the payload into its buffer in ``dsts``."""
    for k, payload, bs in _parts(msg, parts, blocks, fields):
        dst = dsts[k]
        for so, do, rows, cols, sl, dl in bs:
            _block(dst, do, rows, cols, dl).copy_(_block(payload, so, rows, cols, sl))


def _wait(work: Any, timeout: Optional[float], where: str, what: str) -> None:
    """``work.wait()``, within ``timeout`` seconds if given; a transport
    error or a timeout becomes :class:`disttrain.Timeout` at ``where``."""
    try:
        if timeout is None:
            work.wait()
        else:
            work.wait(timeout=datetime.timedelta(seconds=timeout))
    except RuntimeError as e:
        raise _dt.Timeout(f"disttrain: timeout at {where}: {what} did not complete (a send "
                          f"waits for its receive; messages between two ranks match in issue "
                          f"order) [{e}]", "timeout", where) from None


class TorchP2P:
    """The runner's point-to-point transport: each batch of the program (its
    ``batch`` column, C++ ``p2p_batches``) is one
    ``torch.distributed.batch_isend_irecv`` (on NCCL one group, as Megatron-LM
    batches its p2p ops). The runner goes on once the batch's receives are
    in; its sends are waited for before the next batch (one stream: a batch
    starts after the last), and at the end of the iteration (:meth:`flush`).
    Tags are passed (gloo and MPI match by them; NCCL ignores them).
    ``timeout``: seconds a wait may take before :class:`disttrain.Timeout`
    names the rank and its peers (None: the process group's timeout)."""

    def __init__(self, timeout: Optional[float] = None) -> None:
        self.timeout = None if timeout is None else float(timeout)
        self._pending: list = []  # (work, tensor, where) of the last batch's sends

    def exchange(self, sends: list, recvs: list) -> None:
        """``sends`` / ``recvs``: ``(peer, tag, uint8 tensor)`` in program order."""
        self.flush()
        dist = _torch().distributed
        ops = ([dist.P2POp(dist.isend, m, peer, tag=tag) for peer, tag, m in sends] +
               [dist.P2POp(dist.irecv, b, peer, tag=tag) for peer, tag, b in recvs])
        if not ops:
            return
        me = dist.get_rank()
        where = (f"rank {me} -> ranks {sorted({p for p, _, _ in sends})}, "
                 f"<- ranks {sorted({p for p, _, _ in recvs})}")
        what = f"rank {me}'s batch of {len(ops)} messages"
        works = dist.batch_isend_irecv(ops)
        if len(works) != len(ops):  # one coalesced work (NCCL): wait for it
            for w in works:
                _wait(w, self.timeout, where, what)
            return
        for w in works[len(sends):]:
            _wait(w, self.timeout, where, what)
        self._pending = [(w, m, where) for w, (_, _, m) in zip(works, sends)]

    def flush(self) -> None:
        """Waits for the last batch's sends."""
        pending, self._pending = self._pending, []
        for w, _, where in pending:
            _wait(w, self.timeout, where, "a send of the last batch")


class FifoP2P:
    """A test transport with NCCL's matching on any backend (gloo on CPU):
    it ignores tags, matches the messages between two ranks in issue order,
    and completes a send only once its receive has taken it (rendezvous; an
    acknowledgement comes back). A program whose ranks issue a pair's
    messages in different orders fails here, naming the pair, where tag
    matching would hide it and NCCL would hang or deliver the wrong bytes.

    Each message goes as a header (its byte count), then the payload. A
    wait longer than ``timeout`` seconds raises :class:`disttrain.Timeout`
    naming the pair; a message of another size :class:`disttrain.CommError`.
    Within a batch, receives are served in program order: correct for the
    runner's programs (bound in rendezvous order, a batch's messages are of
    one round or of consecutive rounds in order)."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = float(timeout)

    def exchange(self, sends: list, recvs: list) -> None:
        torch = _torch()
        dist = torch.distributed
        me = dist.get_rank()
        keep: list = []  # (work, tensor) pairs alive until done
        acks: list = []
        for peer, _, m in sends:
            h = torch.tensor([m.numel()], dtype=torch.int64)
            keep += [(dist.isend(h, peer, tag=0), h), (dist.isend(m, peer, tag=1), m)]
            a = torch.zeros(1, dtype=torch.int64)
            acks.append((peer, dist.irecv(a, peer, tag=2), a))
        for peer, _, b in recvs:
            where = f"rank {peer} -> rank {me}"
            h = torch.zeros(1, dtype=torch.int64)
            _wait(dist.irecv(h, peer, tag=0), self.timeout, where,
                  f"rank {me}'s receive of the next message from rank {peer}")
            if int(h.item()) != b.numel():
                raise _dt.CommError(
                    f"disttrain: comm_error at {where}: the next message from rank {peer} has "
                    f"{int(h.item())} B, rank {me}'s receive expects {b.numel()} B: the two "
                    f"ranks issue their messages in different orders (they match in issue "
                    f"order, as on NCCL)", "comm_error", where)
            _wait(dist.irecv(b, peer, tag=1), self.timeout, where,
                  f"rank {me}'s receive of a payload from rank {peer}")
            ok = torch.ones(1, dtype=torch.int64)
            keep.append((dist.isend(ok, peer, tag=2), ok))
        for peer, w, _ in acks:
            _wait(w, self.timeout, f"rank {me} -> rank {peer}",
                  f"rank {me}'s send to rank {peer} (never received)")
        for w, _ in keep:
            w.wait()


class BatchSampler:
    """Each rank's dataset indices of each microbatch, in the reorderer's
    order, from one global sample map that every rank computes identically.

    ``sampler``: an iterable of dataset indices, *the same on every rank*
    (``range(n)``, a ``torch.utils.data.RandomSampler`` with a seeded
    generator; not a ``DistributedSampler``); it is cut into global batches of
    ``batch_size`` (a short last batch is dropped unless ``drop_last=False``).
    ``costs(indices)`` returns the ``(n, modules)`` cost of those samples on
    each module that owns ranks (``topology["owning_modules"]`` order).

    Iterating yields, per global batch, one list per microbatch (in execution
    order) of this rank's indices, so it is a ``batch_sampler`` for
    ``torch.utils.data.DataLoader`` (mind that a replica may have no sample in
    a microbatch: an empty list). :meth:`batches` yields ``(sample_map, lists)`` per
    global batch, the map being what :class:`Runner.run` and
    :func:`disttrain.bind_rank` take. Indices must be unique within a batch.

    A ``DataLoader`` prefetches: it iterates the sampler ahead of the batches
    it hands out (``num_workers * prefetch_factor`` lists), so :attr:`map`
    (the newest map) is not the map of the batch in hand. Each map travels
    with its global batch instead: :meth:`loader_batches` yields ``(sample_map,
    [one loaded batch per microbatch])`` in the loader's order.

    ``reorder``: keyword arguments of :class:`disttrain.Reorderer` beyond
    what the topology gives (``balance``, ``order``, ``max_samples``,
    ``max_tokens``, ...), e.g. ``{"max_samples": 8}``.
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, topology: Any, rank: int,
                 costs: Callable[[_np.ndarray], Any], microbatches: int, *,
                 drop_last: bool = True, reorder: Optional[Mapping[str, Any]] = None) -> None:
        self.topology = topology if "ranks" in topology else _dt.topology(topology)
        if not 0 <= rank < self.topology["world_size"]:
            raise _dt.InvalidArgument(f"disttrain: invalid_argument at BatchSampler.rank: rank "
                                      f"{rank} outside the topology's {self.topology['world_size']}"
                                      f" ranks", "invalid_argument", "BatchSampler.rank")
        if batch_size < 1:
            raise _dt.InvalidArgument("disttrain: invalid_argument at BatchSampler.batch_size: "
                                      f"must be >= 1, got {batch_size}", "invalid_argument",
                                      "BatchSampler.batch_size")
        self.sampler, self.batch_size, self.rank = sampler, int(batch_size), int(rank)
        self.microbatches, self.drop_last, self._costs = int(microbatches), drop_last, costs
        self.module, self.replica = module_of(self.topology, rank)
        self.reorderer = _dt.reorderer_of(self.topology, microbatches, **dict(reorder or {}))
        self.map: Optional[dict[str, Any]] = None  #: the newest global batch's sample map
        # The maps of the batches iterated but not yet taken by loader_batches.
        self._pending: deque[dict[str, Any]] = deque()

    def reorder(self, indices: Sequence[int]) -> dict[str, Any]:
        """The sample map of one global batch (the same on every rank)."""
        ids = _np.asarray(indices, dtype=_np.uint64)
        return self.reorderer.assign(self._costs(ids), ids)

    def mine(self, sample_map: Mapping[str, Any]) -> list[list[int]]:
        """This rank's indices of each microbatch of ``sample_map``, in buffer order."""
        return [[int(i) for i in _dt.cell(sample_map, self.module, self.replica, j)]
                for j in range(int(sample_map["microbatches"]))]

    def global_batches(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(int(i))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def batches(self) -> Iterator[tuple[dict[str, Any], list[list[int]]]]:
        """Per global batch: (its sample map, this rank's indices per microbatch)."""
        for batch in self.global_batches():
            self.map = self.reorder(batch)
            yield self.map, self.mine(self.map)

    def __iter__(self) -> Iterator[list[int]]:
        self._pending.clear()  # a new pass (a new DataLoader iterator)
        for m, lists in self.batches():
            self._pending.append(m)
            yield from lists

    def loader_batches(self, loader: Iterable[Any]) -> Iterator[tuple[dict[str, Any], list[Any]]]:
        """Iterates ``loader`` (a DataLoader whose ``batch_sampler`` is this
        sampler) and yields, per global batch, ``(sample_map, batches)``: the batch's
        sample map and the loader's ``microbatches`` batches of it, in
        execution order. The map is the one the loaded indices came from,
        however far the loader prefetched. The loader must keep the
        sampler's order (``in_order=True``, the default)."""
        group: list[Any] = []
        for item in loader:
            group.append(item)
            if len(group) == self.microbatches:
                if not self._pending:
                    raise _dt.InvalidArgument(
                        "disttrain: invalid_argument at BatchSampler.loader_batches: the loader "
                        "handed out a global batch this sampler did not produce (is it the "
                        "loader's batch_sampler?)", "invalid_argument",
                        "BatchSampler.loader_batches")
                yield self._pending.popleft(), group
                group = []
        if group:
            raise _dt.InvalidArgument(
                f"disttrain: invalid_argument at BatchSampler.loader_batches: the loader ended "
                f"{len(group)} batches into a global batch of {self.microbatches} microbatches",
                "invalid_argument", "BatchSampler.loader_batches")

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        full = n // self.batch_size + (0 if self.drop_last or n % self.batch_size == 0 else 1)
        return full * self.microbatches


class Runner:
    """Runs this rank's bound program (:func:`disttrain.bind_rank`) of each
    iteration over ``torch.distributed`` point-to-point, with the trainer's own
    modules as the forward/backward callbacks.

    ``forward(microbatch, x, ids)``: this rank's part of F on its samples
    ``ids`` (sample-map ids in buffer order; maybe empty). ``x`` is the
    received input, a flat tensor of the samples' ``rows x hidden`` blocks
    (None on the first chain stage), with ``requires_grad``; for a link of
    several fields (below), a dict ``{field name: flat tensor}``, the
    differentiable fields with ``requires_grad``. It returns, on
    the last chain stage, the loss (a scalar: scale it as the trainer's loss,
    e.g. divided by the global batch); elsewhere the output, either

    - a dict ``{sample id: tensor}`` of each sample's ``rows x hidden``
      values (checked sample by sample against ``shapes``: a sample with
      another row count, a missing or a foreign id fails naming the sample),
      or
    - one tensor whose flattening is the samples' blocks in ``ids`` order
      (only its total size can be checked: rows in another order go
      undetected);

    for a link of several fields, a dict ``{field name: output as above}``
    with every field of the link; or ``(output, loss)``: the output as above plus a loss of this stage
    (e.g. the LM loss on the backbone's last stage before a generator). B is
    autograd over every loss and output (with the received gradient) of the
    microbatch; :meth:`run` reports the sum of this rank's losses. The
    output's dtype must be ``dtype`` (no silent cast on the wire).

    ``shapes(sample_map)``: the activation of each chain link for that batch, as
    :func:`disttrain.bind_rank` takes it (``elem_size`` is ``dtype``'s), or
    ``{"fields": [...]}`` for a link that carries several named tensors
    (hidden states, position ids, sequence lengths, ...): per field its
    ``name``, ``hidden``, ``rows``, and optional ``dtype`` (a torch dtype,
    ``dtype`` by default), ``split`` and ``differentiable`` (True: its
    gradient flows back; a field that is not, e.g. integer position ids,
    travels forward only). All fields of a message travel in one
    ``batch_isend_irecv`` entry, each at a 16-byte-aligned offset.
    ``params``: this rank's parameters; their gradients are summed over the
    rank's data-parallel group at the program's ``grad_sync`` ops (in
    ``buckets`` buckets); :meth:`run` clears them first. ``step``: called at
    the ``optimizer_step`` op (else call the optimizer after :meth:`run`).
    ``p2p``: the point-to-point transport, :class:`TorchP2P` by default.
    The runner binds its program in rendezvous order
    (``bind_rank(..., order="rendezvous")``) and issues each batch of
    point-to-point ops (the program's ``batch`` column) as one
    ``batch_isend_irecv``, waiting for its receives before its next op and
    for its sends before the next batch: on NCCL, where
    a send waits for its receive and the messages of a pair of ranks match
    in issue order, the world cannot deadlock (checked by
    :func:`disttrain.validate_world`, docs/python.md "NCCL").
    :class:`FifoP2P` enforces NCCL's matching on gloo, for tests.

    ``zero_bubble``: the program in ZB-H1's order (``bind_rank(...,
    zero_bubble=True)``), B and W apart: B computes the input gradient only
    (``torch.autograd.grad``, the graph kept), W the parameters' gradients
    (``backward(..., inputs=params)``). Gradients equal the unsplit run's;
    autograd walks the graph twice (``torch.distributed.pipelining`` keeps
    B's intermediate gradients for W instead).

    ``record``: :meth:`run` also returns ``events``, this rank's per-op
    intervals ``(rank, op index, start, end, track)`` in seconds from the
    iteration's start (a batch of point-to-point ops: its ops share the
    batch's interval, ``wait`` for its receives); gather every rank's and
    pass them to :func:`disttrain.trace_json` (with this Runner's
    ``zero_bubble`` and ``buckets``) for a Perfetto trace. TP: the runner moves the program's
    TP fan-out messages (every TP rank of a replica receives the whole
    input); the math of a TP split is the forward callback's.

    Interleaved 1F1B (the module's ``chunks`` > 1 in the topology): this
    rank holds one model chunk per entry of ``virtual_stages``; ``forward``
    is then called with the keyword ``chunk`` (0-based; chunk c of stage s is
    the path's virtual stage ``topology["path"]`` index), its input is None
    only on the path's first virtual stage and it returns the loss only on
    its last; ``params`` is then one sequence of parameters per chunk (the
    program's gradient buckets are per chunk: ``buckets`` each).

    ``tied``: parameters held on several pipeline stages that are one weight
    (Megatron-LM's embedding group: the input embedding on the backbone's
    first stage, the LM head on its last), as ``{name: (chain_stages,
    param)}``, the same names and chain stages on every rank, ``param`` this
    rank's copy (None on a rank outside those stages). The stages must be of
    one module; at the ``optimizer_step`` op each copy's gradient becomes the
    sum over the copies of its replica and TP rank (after the data-parallel
    sum, so every copy ends with the whole gradient). Start the copies equal.

    Builds one ``torch.distributed`` group per data-parallel group of the
    topology and per tied group (every rank must construct its Runner at the
    same point).
    """

    def __init__(self, topology: Any, forward: Callable[[int, Any, _np.ndarray], Any],
                 shapes: Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]], *,
                 params: Optional[Iterable[Any]] = None, dtype: Any = None,
                 device: Any = None, rank: Optional[int] = None, buckets: int = 1,
                 step: Optional[Callable[[], None]] = None, p2p: Optional[Any] = None,
                 zero_bubble: bool = False, record: bool = False,
                 tied: Optional[Mapping[str, tuple[Sequence[int], Any]]] = None) -> None:
        torch = _torch()
        self._t, self._dist = torch, torch.distributed
        if not self._dist.is_initialized():
            raise _dt.InvalidArgument("disttrain: invalid_argument at Runner: torch.distributed "
                                      "is not initialised (init_process_group first)",
                                      "invalid_argument", "Runner")
        self.topology = topology if "ranks" in topology else _dt.topology(topology)
        self.rank = self._dist.get_rank() if rank is None else int(rank)
        world = self._dist.get_world_size()
        if world != self.topology["world_size"]:
            raise _dt.InvalidArgument(f"disttrain: invalid_argument at Runner.topology: the "
                                      f"topology has {self.topology['world_size']} ranks, the "
                                      f"process group {world}", "invalid_argument",
                                      "Runner.topology")
        self.forward, self.shapes, self.step = forward, shapes, step
        self.p2p = p2p if p2p is not None else TorchP2P()
        self.zero_bubble = bool(zero_bubble)
        self.record = bool(record)
        self.dtype = dtype if dtype is not None else torch.get_default_dtype()
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.module, self.replica = module_of(self.topology, self.rank)
        self.chain_stage = self.topology["ranks"][self.rank]["chain_stage"]
        path = [tuple(x) for x in self.topology["path"]]
        #: this rank's virtual stage per chunk (one entry unless interleaved)
        self.virtual_stages = [v for v, (c, _) in enumerate(path) if c == self.chain_stage]
        self._path_len = len(path)
        self.chunks = len(self.virtual_stages)
        self.last_stage = self.virtual_stages[-1] == self._path_len - 1
        if self.chunks > 1:
            groups = [list(ps) for ps in params] if params is not None else []
            if len(groups) != self.chunks:
                raise _dt.InvalidArgument(
                    f"disttrain: invalid_argument at Runner.params: rank {self.rank} runs "
                    f"{self.chunks} interleaved chunks; give one parameter list per chunk, got "
                    f"{len(groups)}", "invalid_argument", "Runner.params")
        else:
            groups = [[p for p in params] if params is not None else []]
        self._chunk_params = groups
        self.params = [p for ps in groups for p in ps]
        self.buckets = max(1, min([int(buckets)] + [max(1, len(ps)) for ps in groups]))
        self._group = None
        # Every rank creates every DP group, in the same order (new_group's contract).
        ranks = self.topology["ranks"]
        for m, mod in enumerate(self.topology["modules"]):
            if mod["colocated"] or mod["dp"] < 2:
                continue
            for s in range(mod["pp"]):
                for t in range(mod["tp"]):
                    members = [r for r, c in enumerate(ranks)
                               if (c["module"], c["stage"], c["tp_rank"]) == (m, s, t)]
                    g = self._dist.new_group(members)
                    if self.rank in members:
                        self._group = g
        self._tied = self._tied_groups(tied or {})
        self.program: Optional[dict[str, Any]] = None  #: the last iteration's bound program
        self._links: list[dict[str, Any]] = []
        self._row_of: dict[int, int] = {}

    def _tied_groups(self, tied: Mapping[str, tuple[Sequence[int], Any]]) -> list[tuple]:
        """(group, param, name) of each tied group this rank is in; every rank
        creates every group, in name order."""
        out: list[tuple] = []
        ranks, chain = self.topology["ranks"], self.topology["chain"]
        for name in sorted(tied):
            where = f"Runner.tied[{name!r}]"
            stages, param = tied[name]
            stages = sorted({int(c) for c in stages})
            bad = [c for c in stages if not 0 <= c < len(chain)]
            if bad or len(stages) < 2:
                raise _dt.InvalidArgument(
                    f"disttrain: invalid_argument at {where}: needs two or more chain stages in "
                    f"[0, {len(chain)}), got {sorted(tied[name][0])}", "invalid_argument", where)
            mods = sorted({chain[c][0] for c in stages})
            if len(mods) != 1:
                names = [self.topology["modules"][m]["name"] for m in mods]
                raise _dt.InvalidArgument(
                    f"disttrain: invalid_argument at {where}: chain stages {stages} lie in modules "
                    f"{names}; a tied group lies in one module (one DP and TP degree)",
                    "invalid_argument", where)
            if (self.chain_stage in stages) != (param is not None):
                raise _dt.InvalidArgument(
                    f"disttrain: invalid_argument at {where}: rank {self.rank} is on chain stage "
                    f"{self.chain_stage}, "
                    f"{'one of' if self.chain_stage in stages else 'not one of'} {stages}, but "
                    f"was {'not ' if param is None else ''}given a parameter",
                    "invalid_argument", where)
            mod = self.topology["modules"][mods[0]]
            for d in range(mod["dp"]):
                for t in range(mod["tp"]):
                    members = [r for r, c in enumerate(ranks)
                               if c["module"] == mods[0] and c["replica"] == d
                               and c["tp_rank"] == t and c["chain_stage"] in stages]
                    g = self._dist.new_group(members)
                    if self.rank in members:
                        out.append((g, param, name))
        return out

    def _sync_tied(self) -> None:
        """Sums each tied parameter's gradient over its copies."""
        for g, param, _ in self._tied:
            grad = param.grad if param.grad is not None else self._t.zeros_like(param)
            self._dist.all_reduce(grad, group=g)
            param.grad = grad

    def _chunk_at_link(self, link: int) -> int:
        """This rank's chunk at an end of ``link`` (joining virtual stages link, link + 1)."""
        for c, v in enumerate(self.virtual_stages):
            if v == link or v == link + 1:
                return c
        raise _dt.Internal(f"disttrain: internal at Runner: rank {self.rank} is at neither "
                                f"end of link {link}", "internal", "Runner")

    def _output(self, j: int, out: Any, ids: _np.ndarray, sizes: list, c: int = 0) -> list:
        """F's output of microbatch ``j`` (chunk ``c``) as the flat send
        buffer of each field of the output link, checked against ``sizes``
        (the program's output elements per field)."""
        where = "Runner.forward"
        link = self._links[self.virtual_stages[c]]
        fields = link["fields"]
        if not link["multi"]:
            return [self._flat(j, out, ids, fields[0], sizes[0], None)]
        names = [f["name"] for f in fields]
        if not isinstance(out, Mapping) or set(out) != set(names):
            got = sorted(out) if isinstance(out, Mapping) else type(out).__name__
            raise _dt.InvalidArgument(
                f"disttrain: invalid_argument at {where}: microbatch {j} of rank {self.rank} "
                f"returned {got}; its output link has fields {names}: return a dict with each",
                "invalid_argument", where)
        return [self._flat(j, out[f["name"]], ids, f, n, f["name"])
                for f, n in zip(fields, sizes)]

    def _flat(self, j: int, out: Any, ids: _np.ndarray, field: Mapping[str, Any], size: int,
              name: Optional[str]) -> Any:
        """One field of F's output as its flat send buffer, checked."""
        torch = self._t
        where = "Runner.forward"
        what = "" if name is None else f" field {name!r}"
        dtype = field["dtype"]
        if isinstance(out, Mapping):
            hidden, rows = int(field["hidden"]), field["rows"]
            want = [int(i) for i in ids]
            extra = sorted({int(k) for k in out} - set(want))
            if extra:
                raise _dt.InvalidArgument(
                    f"disttrain: invalid_argument at {where}: microbatch {j} of rank {self.rank} "
                    f"returned{what} sample {extra[0]}, which is not one of its samples {want}",
                    "invalid_argument", where)
            keyed = {int(k): v for k, v in out.items()}
            parts = []
            for i in want:
                if i not in keyed:
                    raise _dt.InvalidArgument(
                        f"disttrain: invalid_argument at {where}: microbatch {j} of rank "
                        f"{self.rank} returned{what} no output for sample {i}",
                        "invalid_argument", where)
                r = int(rows[self._row_of[i]])
                if keyed[i].numel() != r * hidden:
                    raise _dt.InvalidArgument(
                        f"disttrain: invalid_argument at {where}: microbatch {j} of rank "
                        f"{self.rank}:{what} sample {i} has {keyed[i].numel()} elements, shapes() "
                        f"gives it {r} rows x {hidden}", "invalid_argument", where)
                parts.append(keyed[i].reshape(-1))
            yj = torch.cat(parts) if parts else torch.zeros(0, dtype=dtype, device=self.device)
        else:
            yj = out.reshape(-1)
        if yj.dtype != dtype:
            raise _dt.InvalidArgument(
                f"disttrain: invalid_argument at {where}: microbatch {j} of rank {self.rank} "
                f"returned{what} {yj.dtype}, the "
                + ("Runner's dtype is" if name is None else "field's dtype is")
                + f" {dtype} (build the Runner with the model's dtype, or cast in forward)",
                "invalid_argument", where)
        if yj.numel() != int(size):
            raise _dt.InvalidArgument(
                f"disttrain: invalid_argument at {where}: microbatch {j} of rank {self.rank} "
                f"returned{what} {yj.numel()} elements, its output buffer holds "
                f"{int(size)} (rows x hidden per sample, from shapes)",
                "invalid_argument", where)
        return yj

    def _link_shapes(self, sample_map: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``shapes(sample_map)`` with each field's dtype (the Runner's where
        none is given) and element size; sets ``self._links``: per link,
        whether it was given as fields and its fields
        (:func:`disttrain.link_fields`)."""
        def typed(f: Any) -> Any:  # the element size follows from the dtype (link_fields)
            if not isinstance(f, Mapping):
                return f
            return {**{k: v for k, v in f.items() if k != "elem_size"},
                    "dtype": f.get("dtype", self.dtype)}
        shapes, self._links = [], []
        for link, s in enumerate(self.shapes(sample_map)):
            multi = isinstance(s, Mapping) and "fields" in s
            if multi and isinstance(s["fields"], Sequence):
                s = dict(s, fields=[typed(f) for f in s["fields"]])
            elif not multi and isinstance(s, Mapping):
                s = typed(dict(s, dtype=self.dtype))
            shapes.append(s)
            fields = _dt.link_fields(s, link)
            for k, f in enumerate(fields):
                if f["differentiable"] and not f["dtype"].is_floating_point:
                    where = f"shapes[{link}].fields[{k}].differentiable"
                    raise _dt.InvalidArgument(
                        f"disttrain: invalid_argument at {where}: field {f['name']!r} has dtype "
                        f"{f['dtype']}, which has no gradient: set differentiable=False",
                        "invalid_argument", where)
            self._links.append({"multi": multi, "fields": fields})
        return shapes

    def bind(self, sample_map: Mapping[str, Any]) -> dict[str, Any]:
        """This rank's bound program for the batch of ``sample_map``."""
        shapes = self._link_shapes(sample_map)
        self._row_of = {int(i): r for r, i in enumerate(sample_map["id"])}
        return _dt.bind_rank(self.topology, sample_map, shapes, self.rank, buckets=self.buckets,
                             zero_bubble=self.zero_bubble, order="rendezvous")

    def _fields_at(self, c: int) -> tuple[list, list]:
        """The fields of chunk ``c``'s input link and of its output link (empty: none)."""
        v = self.virtual_stages[c]
        return (self._links[v - 1]["fields"] if v > 0 else [],
                self._links[v]["fields"] if v + 1 < self._path_len else [])

    def _bucket_params(self, b: int) -> list[Any]:
        """Bucket ``b``: chunk ``b // buckets``'s parameters, split evenly."""
        ps = self._chunk_params[b // self.buckets] if b // self.buckets < self.chunks else []
        n, k = len(ps), b % self.buckets
        return [q for i, q in enumerate(ps) if i * self.buckets // n == k]

    def _exchange(self, p: Mapping[str, Any], col: Mapping[str, list], ops: range, blocks: list,
                  parts: list, stamps: Any, bufs: tuple) -> None:
        """One batch of point-to-point ops ``ops``: packs the sends, runs the
        batch on the transport, checks each received stamp and unpacks."""
        xin, dy, y, dx = bufs  # per (microbatch, chunk): one tensor per field
        kinds, peers, tags, elements = col["kind"], col["peer"], col["tag"], col["elements"]
        sends, recvs = [], []
        for i in ops:
            if elements[i] == 0:
                continue  # nothing to move (both sides skip it)
            k, peer, tag = kinds[i], int(peers[i]), int(tags[i])
            link = col["link"][i]
            jc = col["microbatch"][i] * self.chunks + self._chunk_at_link(link)
            fields = self._links[link]["fields"]
            msg = _message(self._t, col["bytes"][i], self.device)
            if k == _K.send_act or k == _K.send_grad:
                if k == _K.send_act:
                    src = y[jc] if col["phase"][i] == 0 else xin[jc]
                else:
                    src = dx[jc] if col["phase"][i] == 0 else dy[jc]
                _pack([t.detach().contiguous() for t in src], blocks[i], parts[i], fields,
                      stamps[i], msg)
                sends.append((peer, tag, msg))
            else:
                recvs.append((peer, tag, msg, i, xin[jc] if k == _K.recv_act else dy[jc]))
        self.p2p.exchange(sends, [(peer, tag, msg) for peer, tag, msg, _, _ in recvs])
        for peer, _, msg, i, dest in recvs:
            if not self._t.equal(msg[:_STAMP_BYTES], stamps[i]):
                got = int.from_bytes(msg[:_STAMP_BYTES].cpu().numpy().tobytes(), "little")
                where = f"rank {self.rank} op #{i}"
                raise _dt.CommError(
                    f"disttrain: comm_error at {where}: plan disagreement between rank {peer} "
                    f"and rank {self.rank}: rank {peer} sent stamp {got:#018x} where this "
                    f"rank's program has {int(p['stamp'][i]):#018x}: the two programs were "
                    f"bound from different inputs (topology, sample map or shapes), or issue "
                    f"their messages in different orders; the received bytes are not used",
                    "comm_error", where)
            _unpack(msg, blocks[i], parts[i], self._links[col["link"][i]]["fields"], dest)

    def run(self, sample_map: Mapping[str, Any], *, zero_grad: bool = True,
            sync: bool = True) -> dict[str, Any]:
        """Runs one iteration on the batch of ``sample_map``. Returns ``loss`` (the
        sum of this rank's losses, a float: the last chain stage's and any
        stage's ``(output, loss)``; 0 on a rank with none), ``program`` and
        ``messages`` (point-to-point ops run).

        Gradient accumulation over several batches: ``zero_grad=False`` keeps
        the gradients already in ``params`` (the default clears them first),
        ``sync=False`` skips the data-parallel and tied sums and the
        ``optimizer_step`` op (Megatron-LM's ``no_sync``), e.g.
        ``run(m1, sync=False); run(m2, zero_grad=False)``: the last call sums
        every batch's gradients over the DP group once, then steps."""
        torch, dist = self._t, self._dist
        p = self.program = self.bind(sample_map)
        if zero_grad:
            for q in self.params:  # the gradients of this batch only
                q.grad = None
        # The per-op columns as Python lists (indexing NumPy per op is slower).
        col = {k: p[k].tolist() for k in ("kind", "peer", "tag", "elements", "microbatch", "link",
                                           "bytes", "phase", "chunk", "batch", "bucket")}
        kinds, mbs, chunk_of = col["kind"], col["microbatch"], col["chunk"]
        M, V, F = int(sample_map["microbatches"]), self.chunks, int(p["fields"])
        zeros = lambda n, f: torch.zeros(int(n), dtype=f["dtype"], device=self.device)  # noqa: E731
        at_chunk = [self._fields_at(c) for c in range(V)]  # (input fields, output fields)
        in_el = p["input_elements"].reshape(-1, F).tolist()
        out_el = p["output_elements"].reshape(-1, F).tolist()
        # Per (microbatch j, chunk c) at j * V + c, one tensor per field of the link:
        xin = [[zeros(n, f) for n, f in zip(in_el[jc], at_chunk[jc % V][0])]
               for jc in range(M * V)]                    # received input
        dy = [[zeros(n, f) for n, f in zip(out_el[jc], at_chunk[jc % V][1])]
              for jc in range(M * V)]                     # received output gradient
        x: list[Any] = [None] * (M * V)                   # the input F read (autograd leaves)
        y: list[Any] = [None] * (M * V)                   # F's output per field (or the loss)
        aux: list[Any] = [None] * (M * V)                 # a stage's own loss: (output, loss)
        dx: list[Any] = [None] * (M * V)                  # input gradient B produced, per field
        wait_w: list[Any] = [None] * (M * V)              # split: B's graph, for W
        blocks = [b.tolist() if b is not None else None for b in p["blocks"]]
        parts = [b.tolist() if b is not None else None for b in p["parts"]]
        ids = [_dt.cell(sample_map, self.module, self.replica, j) for j in range(M)]
        recv_kinds = (_K.recv_act, _K.recv_grad)
        # Each message carries its plan stamp ahead of the payload, in one
        # message (the C++ executor sends it as a second one): programs bound
        # from different inputs (or issuing a pair's messages in different
        # orders) fail, naming the pair.
        stamps = torch.from_numpy(p["stamp"].view(_np.uint8).reshape(-1, _STAMP_BYTES)).to(
            self.device)  # per op, its stamp's 8 bytes

        reductions: dict[int, tuple[Any, Any, list[Any]]] = {}
        loss = 0.0
        synced = False  # the tied gradients (at the optimizer_step op)
        batch = col["batch"]
        n_ops, i = len(kinds), 0
        events: list[tuple] = []  # record: (rank, op, start, end, track), seconds from t0
        t0 = time.perf_counter()
        while i < n_ops:
            k, j = kinds[i], int(mbs[i])
            ts = time.perf_counter() - t0
            if batch[i] >= 0:  # a batch of point-to-point ops: issued together, waited
                end = i
                while end < n_ops and batch[end] == batch[i]:
                    end += 1
                self._exchange(p, col, range(i, end), blocks, parts, stamps, (xin, dy, y, dx))
                if self.record:  # the batch's ops share its interval
                    te = time.perf_counter() - t0
                    events += [(self.rank, b, ts, te, "wait" if kinds[b] in recv_kinds
                                else "compute") for b in range(i, end)]
                i = end
                continue
            o, i = i, i + 1
            if k in (_K.F, _K.B, _K.W):
                c = int(chunk_of[o])
                vs, jc = self.virtual_stages[c], j * V + int(chunk_of[o])
                last = vs == self._path_len - 1
            if k == _K.F:
                xj = None
                if vs > 0:
                    ins = at_chunk[c][0]
                    x[jc] = [t.detach().requires_grad_(bool(f["differentiable"]))
                             for t, f in zip(xin[jc], ins)]
                    xj = (dict(zip((f["name"] for f in ins), x[jc]))
                          if self._links[vs - 1]["multi"] else x[jc][0])
                with torch.enable_grad():
                    out = (self.forward(j, xj, ids[j], chunk=c) if V > 1
                           else self.forward(j, xj, ids[j]))
                if last:
                    y[jc] = out if isinstance(out, torch.Tensor) else None
                    loss += float(out.detach() if isinstance(out, torch.Tensor) else out)
                else:
                    if isinstance(out, tuple):
                        out, aux[jc] = out
                        loss += float(aux[jc].detach())
                    y[jc] = self._output(j, out, ids[j], out_el[jc], c)
            elif k == _K.B:
                # The backward over the microbatch's output (with the received
                # gradient) and its losses: whole, or (split, ZB-H1) only the
                # input gradient, the graph kept for W.
                ins, outs = at_chunk[c]
                pairs = ([(y[jc], None)] if last else
                         [(t, g) for t, g, f in zip(y[jc], dy[jc], outs) if f["differentiable"]])
                roots, grads = [], []
                for t, g in pairs + [(aux[jc], None)]:
                    if isinstance(t, torch.Tensor) and t.requires_grad:
                        roots.append(t)
                        grads.append(g)
                xs = x[jc] if x[jc] is not None else []
                leaves = [t for t, f in zip(xs, ins) if f["differentiable"]]
                if self.zero_bubble:
                    got = (torch.autograd.grad(roots, leaves, grads, retain_graph=True,
                                               allow_unused=True)
                           if roots and leaves else [None] * len(leaves))
                    wait_w[jc] = (roots, grads)
                else:
                    if roots:
                        torch.autograd.backward(roots, grads)
                    got = [t.grad for t in leaves]
                # Per input field: its gradient (zeros where none reached it;
                # an empty tensor for a field that is not differentiable: its
                # part of every gradient message is empty).
                it, dx[jc] = iter(got), []
                for q, f in enumerate(ins):
                    g = next(it) if f["differentiable"] else None
                    dx[jc].append(g if g is not None else
                                  zeros(in_el[jc][q] if f["differentiable"] else 0, f))
                aux[jc] = None
                x[jc] = y[jc] = None
            elif k == _K.W:
                # The weight gradients of B's graph (autograd walks it again:
                # torch.distributed.pipelining instead keeps B's intermediate
                # gradients; same result, more compute).
                roots, grads = wait_w[jc]
                ps = [q for q in self._chunk_params[c] if q.requires_grad]
                if roots and ps:
                    torch.autograd.backward(roots, grads, inputs=ps)
                wait_w[jc] = None
            elif k in (_K.grad_sync_start, _K.grad_sync_finish,
                       _K.optimizer_step) and not sync:
                continue  # accumulating: no reduction, no step (see above)
            elif k == _K.grad_sync_start:
                b = col["bucket"][o]
                ps = self._bucket_params(b)
                if self._group is not None and ps:
                    flat = torch.cat([(q.grad if q.grad is not None else torch.zeros_like(q))
                                      .reshape(-1) for q in ps])
                    reductions[b] = (dist.all_reduce(flat, group=self._group, async_op=True),
                                     flat, ps)
            elif k == _K.grad_sync_finish:
                b = col["bucket"][o]
                if b in reductions:
                    work, flat, ps = reductions.pop(b)
                    work.wait()
                    at = 0
                    for q in ps:
                        n = q.numel()
                        if q.grad is None:
                            q.grad = torch.zeros_like(q)
                        q.grad.copy_(flat[at:at + n].view_as(q))
                        at += n
            elif k == _K.optimizer_step:
                self._sync_tied()
                synced = True
                if self.step is not None:
                    self.step()
            else:
                raise _dt.Internal(f"disttrain: internal at Runner.run: op kind "
                                   f"{_dt.OP_KINDS[k]}", "internal", "Runner.run")
            if self.record:
                events.append((self.rank, o, ts, time.perf_counter() - t0,
                               "wait" if k == _K.grad_sync_finish else "compute"))
        flush = getattr(self.p2p, "flush", None)
        if flush is not None:
            flush()
        if sync and not synced:
            self._sync_tied()
        return {"loss": loss, "program": p, "events": events,
                "messages": int(sum(1 for k in kinds if k in recv_kinds) +
                                sum(1 for k in kinds if k in (_K.send_act,
                                                              _K.send_grad)))}
