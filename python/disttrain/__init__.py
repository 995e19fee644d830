"""disttrain from Python: the planner, the evaluator, the simulator and the
microbatch reorderer of the C++ library (a thin nanobind layer, docs/python.md).

Specs, plans and results are plain dicts (the library's JSON); the reorderer
takes and returns NumPy arrays. Errors are :class:`disttrain.Error` subclasses
with ``errc`` and ``where``. Long calls release the GIL; results are
deterministic across processes, as in C++.

>>> import disttrain
>>> r = disttrain.plan(disttrain.presets.scenario("paper-72b"))
>>> r["plan"]["modules"][1]["pp"], r["iteration_time_s"]
"""
from __future__ import annotations

import enum as _enum
import inspect as _inspect
import json as _json
import os as _os
import threading as _threading
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as _np

from . import _core, presets
from ._version import __version__
from .records import Program, SampleMap, Topology
from .errors import (CommError, Error, Infeasible, Internal, InvalidArgument, ParseError,
                     ScheduleError, Timeout, Unsupported)

__all__ = [
    "__version__", "presets", "plan", "plan_baseline", "heterogeneity", "evaluate", "simulate",
    "reorder",
    "Reorderer", "topology", "topology_of", "reorder_options_of", "reorderer_of", "bind_rank",
    "validate_world", "trace_json", "TRACKS", "link_fields", "Topology", "SampleMap", "Program",
    "cell", "OP_KINDS", "OpKind", "Error", "InvalidArgument", "ParseError", "Infeasible", "ScheduleError",
    "CommError", "Timeout", "Unsupported", "Internal",
]

Scenario = Union[Mapping[str, Any], str, "_os.PathLike[str]"]
PathLike = Union[str, "_os.PathLike[str]"]


# ---- scenarios ---------------------------------------------------------------

def _scenario(s: Scenario) -> tuple[str, dict[str, Any], Optional[dict[str, Any]]]:
    """(scenario JSON text, its "planner" object, its "cost" object) from a dict,
    a preset name or a JSON file with the shape ``disttrain-plan --config`` reads."""
    if isinstance(s, (str, _os.PathLike)):
        if isinstance(s, str) and s in presets.names():
            d: dict[str, Any] = presets.scenario(s)
        else:
            path = _os.fspath(s)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ParseError(f"disttrain: parse_error at {path}: cannot open file for reading "
                                 f"({e.strerror}); not a preset either (known: "
                                 f"{', '.join(presets.names())})", "parse_error", path) from None
            try:
                d = _json.loads(text)
            except ValueError as e:
                raise ParseError(f"disttrain: parse_error at {path}: malformed JSON: {e}",
                                 "parse_error", path) from None
    elif isinstance(s, Mapping):
        d = dict(s)
    else:
        raise InvalidArgument(f"disttrain: invalid_argument at scenario: expected a dict, a preset "
                              f"name or a JSON file path, got {type(s).__name__}",
                              "invalid_argument", "scenario")
    if not isinstance(d, dict):
        raise ParseError("disttrain: parse_error at scenario: expected a JSON object",
                         "parse_error", "scenario")
    planner = d.pop("planner", None) or {}
    cost = d.pop("cost", None)
    # Preset names as shortcuts, as in disttrain-plan --config.
    if isinstance(d.get("model"), str):
        d["model"] = presets.model(d["model"])
    if isinstance(d.get("data"), str):
        d["data"] = presets.data(d["data"])
    cl = d.get("cluster")
    if isinstance(cl, Mapping) and "preset" in cl:
        extra = sorted(set(cl) - {"preset", "num_gpus"})
        if extra:
            raise ParseError(f"disttrain: parse_error at cluster.{extra[0]}: unknown key "
                             f"'{extra[0]}' next to 'preset' (allowed: preset, num_gpus)",
                             "parse_error", f"cluster.{extra[0]}")
        if "num_gpus" not in cl:
            raise ParseError("disttrain: parse_error at cluster.num_gpus: required field is missing",
                             "parse_error", "cluster.num_gpus")
        d["cluster"] = presets.cluster(cl["preset"], cl["num_gpus"])
    return _json.dumps(d), dict(planner), cost


def _dumps(x: Any) -> str:
    return "" if x is None else _json.dumps(x)


def _plan(scenario: Scenario, options: dict[str, Any], cost: Optional[Mapping[str, Any]],
          baseline: bool, data: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    text, planner, sc_cost = _scenario(scenario)
    planner.update({k: v for k, v in options.items() if v is not None})
    data = {k: v for k, v in (data or {}).items() if v is not None}
    return _json.loads(_core.plan(text, _json.dumps(planner),
                                  _dumps(cost if cost is not None else sc_cost), baseline,
                                  _json.dumps(data) if data else ""))


def _data_options(data_objective: Optional[str], data_batches: Optional[int],
                  finalists: Optional[int]) -> dict[str, Any]:
    return dict(objective=data_objective, batches=data_batches, finalists=finalists)


def plan(scenario: Scenario, *, max_backbone_pp: Optional[int] = None,
         min_backbone_pp: Optional[int] = None, max_side_pp: Optional[int] = None,
         tp_candidates: Optional[Sequence[int]] = None, search_recompute: Optional[bool] = None,
         search_selective_recompute: Optional[bool] = None,
         max_virtual_stages: Optional[int] = None, overlap_grad_reduce: Optional[bool] = None,
         overlap_param_gather: Optional[bool] = None, sequence_parallel: Optional[bool] = None,
         zero_bubble: Optional[bool] = None, data_objective: Optional[str] = None,
         data_batches: Optional[int] = None, finalists: Optional[int] = None,
         cost: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The planner's best disaggregated layout (``disttrain-plan``'s plan).

    ``scenario``: a dict (``presets.scenario(...)``, or the ``--config`` JSON with
    preset-name shortcuts and optional ``"planner"`` / ``"cost"`` objects), a
    preset name or a JSON file path. Keyword arguments are the C++
    ``planner_options`` (None: the scenario's ``"planner"`` value, else the C++
    default); ``cost`` overrides the cost-model parameters. ``zero_bubble=True``
    also considers ZB-H1 (``"schedule": "zb_h1"`` plans); :func:`plan_baseline`
    never runs it.

    Returns a dict: ``plan`` (the plan JSON), ``iteration_time_s``, ``mfu``,
    ``gpus``, ``bubble_fraction``, ``max_memory_bytes``, ``samples_per_s``,
    ``solve_ms`` (wall time: the only field that varies between runs),
    ``stats``, ``evaluation`` (per-stage report), ``scenario``, ``num_gpus``,
    ``global_batch``, ``data_objective``. Raises ``Infeasible`` when nothing fits.

    ``data_objective``: ``"sampled"`` (the default with the time objective, as
    ``disttrain-plan``) minimises the mean iteration over ``data_batches``
    sampled global batches after the reorderer (interleaving is not searched);
    the result then holds ``data_plan`` (``predicted`` mean/p90 iteration
    times, ``predicted_mfu``, search counters). ``"expected"`` minimises the
    closed form of the expected batch. ``finalists`` re-ranks the best plans
    with the full simulator (slower). docs/planner.md, "Planning for the data".
    """
    return _plan(scenario, dict(max_backbone_pp=max_backbone_pp, min_backbone_pp=min_backbone_pp,
                                max_side_pp=max_side_pp,
                                tp_candidates=None if tp_candidates is None else list(tp_candidates),
                                search_recompute=search_recompute,
                                search_selective_recompute=search_selective_recompute,
                                max_virtual_stages=max_virtual_stages,
                                overlap_grad_reduce=overlap_grad_reduce,
                                overlap_param_gather=overlap_param_gather,
                                sequence_parallel=sequence_parallel,
                                zero_bubble=zero_bubble), cost, False,
                 _data_options(data_objective, data_batches, finalists))


def heterogeneity(scenario: Scenario, *, iterations: int = 8, seed: Optional[int] = None,
                  data_objective: Optional[str] = None, data_batches: Optional[int] = None,
                  finalists: Optional[int] = None, cost: Optional[Mapping[str, Any]] = None,
                  **planner: Any) -> dict[str, Any]:
    """The plan (:func:`plan` with the same data options) and the Megatron-LM-style
    baseline on ``iterations`` sampled global batches (``disttrain-plan
    --iterations``), interleaved plans re-planned without interleaving. Four
    cases, each with ``mean_s``, ``median_s``, ``p90_s``, ``seconds``, ``mfu``:
    ``baseline_arrival`` (a), ``plan_arrival`` (b), ``plan_reordered`` (c, with
    ``predicted_mean_s`` / ``predicted_p90_s`` under the sampled objective) and
    ``baseline_reordered`` (d); gains ``orchestration_gain`` (d)/(c),
    ``reordering_gain`` (b)/(c), ``total_gain`` (a)/(c); ``plan`` and
    ``baseline_plan``. ``planner``: :func:`plan`'s planner keywords."""
    text, popt, sc_cost = _scenario(scenario)
    popt.update({k: v for k, v in planner.items() if v is not None})
    data = {k: v for k, v in _data_options(data_objective, data_batches, finalists).items()
            if v is not None}
    return _json.loads(_core.heterogeneity(text, _json.dumps(popt),
                                           _dumps(cost if cost is not None else sc_cost),
                                           _json.dumps(data) if data else "", iterations, seed))


def plan_baseline(scenario: Scenario, *, max_backbone_pp: Optional[int] = None,
                  min_backbone_pp: Optional[int] = None, max_side_pp: Optional[int] = None,
                  tp_candidates: Optional[Sequence[int]] = None,
                  search_recompute: Optional[bool] = None,
                  search_selective_recompute: Optional[bool] = None,
                  max_virtual_stages: Optional[int] = None,
                  overlap_grad_reduce: Optional[bool] = None,
                  overlap_param_gather: Optional[bool] = None,
                  sequence_parallel: Optional[bool] = None,
                  cost: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The Megatron-LM-style baseline layout (one TP/PP/DP, even layer split),
    searched with the same options and cost model; same result shape as :func:`plan`."""
    return _plan(scenario, dict(max_backbone_pp=max_backbone_pp, min_backbone_pp=min_backbone_pp,
                                max_side_pp=max_side_pp,
                                tp_candidates=None if tp_candidates is None else list(tp_candidates),
                                search_recompute=search_recompute,
                                search_selective_recompute=search_selective_recompute,
                                max_virtual_stages=max_virtual_stages,
                                overlap_grad_reduce=overlap_grad_reduce,
                                overlap_param_gather=overlap_param_gather,
                                sequence_parallel=sequence_parallel), cost, True)


def _plan_text(p: Mapping[str, Any]) -> str:
    if not isinstance(p, Mapping):
        raise InvalidArgument(f"disttrain: invalid_argument at plan: expected a dict, got "
                              f"{type(p).__name__}", "invalid_argument", "plan")
    return _json.dumps(dict(p))


def evaluate(plan: Mapping[str, Any], scenario: Scenario, *,
             cost: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """Scores a given plan (a plan dict, or a :func:`plan` result holding one under
    ``"plan"``) on a scenario (``disttrain-plan --evaluate``). The plan's
    ``global_batch`` must equal the scenario's. Returns ``plan``,
    ``iteration_time_s``, ``mfu``, ``evaluation``, ``scenario``."""
    text, _, sc_cost = _scenario(scenario)
    return _json.loads(_core.evaluate(_plan_text(plan), text,
                                      _dumps(cost if cost is not None else sc_cost)))


def simulate(plan: Mapping[str, Any], scenario: Scenario, *, trace: Optional[PathLike] = None,
             svg: Optional[PathLike] = None,
             cost: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """Runs the discrete-event simulator on a plan's iteration
    (``disttrain-plan --trace/--svg``): writes a Chrome/Perfetto trace JSON to
    ``trace`` and an SVG timeline to ``svg`` when given. Returns
    ``iteration_time_s`` (simulated), ``ops``, ``trace``, ``svg``, ``scenario``.
    Interleaved plans run as planned; a GPipe plan raises ``Unsupported``."""
    text, _, sc_cost = _scenario(scenario)
    return _json.loads(_core.simulate(_plan_text(plan), text,
                                      _dumps(cost if cost is not None else sc_cost),
                                      None if trace is None else _os.fspath(trace),
                                      None if svg is None else _os.fspath(svg)))


# ---- reorderer ----------------------------------------------------------------

def _costs(costs: Any) -> _np.ndarray:
    a = _np.ascontiguousarray(costs, dtype=_np.float64)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise InvalidArgument(f"disttrain: invalid_argument at costs: expected an (n, modules) "
                              f"array, got {a.ndim} dimensions", "invalid_argument", "costs")
    return a


def _ids(ids: Any) -> Optional[_np.ndarray]:
    if ids is None:
        return None
    a = _np.asarray(ids)
    if a.dtype.kind not in "ui" or a.ndim != 1:
        raise InvalidArgument(f"disttrain: invalid_argument at ids: expected a 1-D integer array, "
                              f"got dtype {a.dtype} with {a.ndim} dimensions",
                              "invalid_argument", "ids")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise InvalidArgument(f"disttrain: invalid_argument at ids: ids must be >= 0, got "
                              f"{int(a.min())}", "invalid_argument", "ids")
    return _np.ascontiguousarray(a, dtype=_np.uint64)


def _tokens(tokens: Any, costs: _np.ndarray) -> Optional[_np.ndarray]:
    if tokens is None:
        return None
    a = _np.asarray(tokens)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.dtype.kind not in "ui" or a.ndim != 2:
        raise InvalidArgument(f"disttrain: invalid_argument at tokens: expected an (n, modules) "
                              f"integer array, got dtype {a.dtype} with {a.ndim} dimensions",
                              "invalid_argument", "tokens")
    if a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
        raise InvalidArgument(f"disttrain: invalid_argument at tokens: tokens must be in "
                              f"[0, 2^32 - 1], got [{int(a.min())}, {int(a.max())}]",
                              "invalid_argument", "tokens")
    if a.shape != costs.shape:
        raise InvalidArgument(f"disttrain: invalid_argument at tokens: has shape {a.shape}, costs "
                              f"has {costs.shape}", "invalid_argument", "tokens")
    return _np.ascontiguousarray(a, dtype=_np.uint32)


def _per_module(v: Any, n: int, key: str) -> list[int]:
    """An int for every module, or one per module; 0 means no limit."""
    vs = [v] * n if isinstance(v, (int, _np.integer)) else list(v)
    if len(vs) != n:
        raise InvalidArgument(f"disttrain: invalid_argument at {key}: {len(vs)} values for "
                              f"{n} modules", "invalid_argument", key)
    return [int(x) for x in vs]


def _reorder_options(dp: Union[int, Sequence[int]], microbatches: int, *,
                     names: Optional[Sequence[str]] = None,
                     max_samples: Any = None, max_tokens: Any = None,
                     microbatch_group: Optional[int] = None, equal_count: Optional[bool] = None,
                     slots: Optional[str] = None, balance: Optional[str] = None,
                     order: Optional[str] = None, order_budget: Optional[int] = None,
                     slot_search_budget: Optional[int] = None,
                     slot_search_below: Optional[int] = None,
                     exact_search_budget: Optional[int] = None,
                     cut_search_budget: Optional[int] = None,
                     stages: Optional[Sequence[Any]] = None) -> str:
    """The C++ reorder_options JSON text of :func:`reorder`'s arguments: the
    one list of the options (:func:`reorder` and :class:`Reorderer` take its
    signature; python/tests/test_reorder.py checks it against the C++ fields)."""
    dps = [dp] if isinstance(dp, (int, _np.integer)) else list(dp)
    if names is not None and len(names) != len(dps):
        raise InvalidArgument(f"disttrain: invalid_argument at names: {len(names)} names for "
                              f"{len(dps)} modules", "invalid_argument", "names")
    mods = [{"name": names[k] if names is not None else f"module{k}", "dp": int(d)}
            for k, d in enumerate(dps)]
    for key, v in (("max_samples", max_samples), ("max_tokens", max_tokens)):
        if v is not None:
            for mod, x in zip(mods, _per_module(v, len(mods), key)):
                if x != 0:
                    mod[key] = x
    o: dict[str, Any] = {"modules": mods, "microbatches": int(microbatches)}
    for key, v in (("microbatch_group", microbatch_group), ("equal_count", equal_count),
                   ("slots", slots), ("balance", balance), ("order", order),
                   ("order_budget", order_budget), ("slot_search_budget", slot_search_budget),
                   ("slot_search_below", slot_search_below),
                   ("exact_search_budget", exact_search_budget),
                   ("cut_search_budget", cut_search_budget)):
        if v is not None:
            o[key] = v
    if stages is not None:
        o["stages"] = [dict(s) if isinstance(s, Mapping) else
                       dict(zip(("module", "forward_scale", "backward_scale"), s))
                       for s in stages]
    return _json.dumps(o)


class Reorderer:
    """A reusable reorderer (C++ ``disttrain::reorderer<>``): keeps its buffers
    between batches. Same arguments as :func:`reorder` minus the batch.
    Calls on one object are serialised (it releases the GIL while it works)."""

    def __init__(self, dp: Union[int, Sequence[int]], microbatches: int,
                 **options: Any) -> None:
        self._r = _core.Reorderer(_reorder_options(dp, microbatches, **options))

    @property
    def options(self) -> dict[str, Any]:
        """The C++ ``reorder_options`` in use, as JSON (stages filled in)."""
        return _json.loads(self._r.options())

    def assign(self, costs: Any, ids: Any = None, tokens: Any = None) -> SampleMap:
        """Reorders one global batch; see :func:`reorder`."""
        c = _costs(costs)
        return SampleMap.from_dict(self._r.assign(c, _ids(ids), _tokens(tokens, c)))

    def assign_json(self, costs: Any, ids: Any = None, tokens: Any = None) -> dict[str, Any]:
        """The C++ ``reorder_result`` JSON (samples sorted by id, loads per cell), as a dict."""
        c = _costs(costs)
        return _json.loads(self._r.assign_json(c, _ids(ids), _tokens(tokens, c)))


def reorder(costs: Any, dp: Union[int, Sequence[int]], microbatches: int, *, ids: Any = None,
            tokens: Any = None, **options: Any) -> SampleMap:
    """Reorders one global batch (C++ ``reorderer<>::assign``, docs/reorder.md).

    ``costs``: float64 array ``(n, modules)`` (or ``(n,)`` for one module), the
    cost of each sample on each module; ``dp``: DP replicas per module;
    ``microbatches``: microbatch slots; ``ids``: optional unique non-negative
    integer ids (default: row numbers); ``tokens``: optional non-negative
    integer array shaped like ``costs``, each sample's size per module (read
    for modules with ``max_tokens``). ``options``: ``names``, ``max_samples``
    and ``max_tokens`` (per-microbatch limits of one replica, docs/reorder.md
    "Per-microbatch limits": an int for every module or one per module, 0 for
    none; a limit no split can keep raises ``Infeasible`` naming the limit or
    the sample),
    ``microbatch_group``, ``equal_count``, ``slots`` (arrival, size_sorted,
    balanced, best, objective: the default, which depends on the input order;
    best does not), ``balance`` (none, lpt, karmarkar_karp, refined), ``order``
    (identity, paper, search), ``order_budget``, ``slot_search_budget``,
    ``slot_search_below``, ``exact_search_budget`` (the exact finish's work
    for the whole batch, which bounds a call's time; 0: none),
    ``cut_search_budget``, ``stages``
    (dicts or ``(module, forward_scale, backward_scale)`` tuples).

    Returns a dict whose arrays are in input row order: ``id`` uint64 ``(n,)``,
    ``microbatch`` uint32 ``(n,)`` (execution position, 0 runs first),
    ``replica`` and ``offset`` uint32 ``(n, modules)`` (DP replica of each
    module and position inside that replica's share), ``load`` (per module a
    float64 ``(microbatches, dp)`` array), ``imbalance`` float64 ``(modules,)``,
    ``iteration_time``, ``microbatches``, ``dp``. The same inputs give the same
    result in any process. Each thread keeps the C++ reorderers of its last
    (up to 8) option sets, so repeated calls allocate no scratch space.
    """
    key = _reorder_options(dp, microbatches, **options)
    cache = _cache.__dict__.setdefault("reorderers", {})
    r = cache.get(key)
    if r is None:
        if len(cache) >= 8:
            cache.clear()
        r = cache[key] = _core.Reorderer(key)
    c = _costs(costs)
    return SampleMap.from_dict(r.assign(c, _ids(ids), _tokens(tokens, c)))


def _with_options(fn: Any, leading: Sequence[_inspect.Parameter]) -> None:
    """Gives `fn` (taking ``**options``) the signature of `leading` plus
    _reorder_options' keyword options, for help() and inspect."""
    opts = [q for q in _inspect.signature(_reorder_options).parameters.values()
            if q.kind is q.KEYWORD_ONLY]
    fn.__signature__ = _inspect.Signature([*leading, *opts])


_P = _inspect.Parameter
_with_options(Reorderer.__init__, [
    _P("self", _P.POSITIONAL_OR_KEYWORD), _P("dp", _P.POSITIONAL_OR_KEYWORD),
    _P("microbatches", _P.POSITIONAL_OR_KEYWORD)])
_with_options(reorder, [
    _P("costs", _P.POSITIONAL_OR_KEYWORD), _P("dp", _P.POSITIONAL_OR_KEYWORD),
    _P("microbatches", _P.POSITIONAL_OR_KEYWORD), _P("ids", _P.KEYWORD_ONLY, default=None),
    _P("tokens", _P.KEYWORD_ONLY, default=None)])

# reorder() keeps one C++ reorderer (its scratch buffers) per thread and option
# set, as a C++ trainer keeps its reorderer: a call allocates no scratch space.
_cache = _threading.local()


# ---- topology and bound per-rank programs --------------------------------------

TopologyLike = Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]

#: Names of the op kinds, indexed by a program's ``kind`` codes.
OP_KINDS: tuple[str, ...] = tuple(_core.op_kinds)

#: The op kinds as an ``IntEnum`` (``OpKind.F``, ``OpKind.send_act``, ...),
#: built from the C++ ``op_kind`` names so the two cannot drift; members
#: compare equal to a program's ``kind`` codes.
OpKind = _enum.IntEnum("OpKind", {name: code for code, name in enumerate(OP_KINDS)})


def _topology_text(t: TopologyLike) -> str:
    if isinstance(t, Mapping):
        mods = t.get("modules")
    elif isinstance(t, Sequence) and not isinstance(t, (str, bytes)):
        mods = t
    else:
        raise InvalidArgument(f"disttrain: invalid_argument at topology: expected a dict with "
                              f"'modules' or a list of modules, got {type(t).__name__}",
                              "invalid_argument", "topology")
    if mods is None:
        raise ParseError("disttrain: parse_error at topology.modules: required field is missing",
                         "parse_error", "topology.modules")
    return _json.dumps({"modules": [dict(m) for m in mods]})


def topology(t: TopologyLike) -> Topology:
    """The pipeline's one topology (C++ ``disttrain::topology``), validated.

    ``t``: a dict with ``"modules"`` (or the list itself), each module a dict
    with ``name``, ``role`` (encoder, backbone, generator), and optional
    ``tp``/``pp``/``dp`` (1), ``trainable`` (True), ``colocated`` (False),
    ``layers`` (layers per stage, which weight the reorderer's stages; absent:
    equal stages; :func:`topology_of` fills them from the plan), in pipeline
    order. Returns the modules plus what is derived from them:
    ``world_size``, ``backbone`` (module index), ``chain`` (``[module, stage]``
    per chain stage), ``owning_modules`` (the modules that own ranks: the
    reorderer's modules, in order), ``ranks`` (per global rank: ``module``,
    ``stage``, ``replica``, ``tp_rank``, ``chain_stage``) and ``describe``.
    Rank numbering: ``base(module) + (stage * dp + replica) * tp + tp_rank``.
    Errors name the field (``topology.modules[1].dp``).
    """
    return Topology.from_dict(_json.loads(_core.topology(_topology_text(t))))


def topology_of(plan: Mapping[str, Any], model: Optional[Mapping[str, Any]] = None
                ) -> Topology:
    """The topology of a plan (a plan dict or a :func:`plan` result), as
    :func:`topology` returns it; with ``model`` (a model spec dict) a module
    the model freezes is not trainable."""
    return Topology.from_dict(_json.loads(_core.topology_of(
        _plan_text(plan), "" if model is None else _json.dumps(dict(model)))))


def reorder_options_of(t: TopologyLike, microbatches: int) -> dict[str, Any]:
    """The reorderer's options of a topology (C++ ``reorder_options_of``):
    module k = the k-th module owning ranks with its DP degree, the scoring
    pipeline with each module's stages (:func:`reorderer_of` builds the reorderer)."""
    return _json.loads(_core.reorder_options_of(_topology_text(t), int(microbatches)))


def reorderer_of(t: TopologyLike, microbatches: int, **options: Any) -> "Reorderer":
    """A :class:`Reorderer` with :func:`reorder_options_of`'s options (modules,
    DP degrees, the scoring stages); ``options``: any other keyword argument
    of :class:`Reorderer` (``balance``, ``order``, ``max_samples``, ...)."""
    o = reorder_options_of(t, microbatches)
    for fixed in ("dp", "microbatches", "names", "stages"):
        if fixed in options:
            raise InvalidArgument(f"disttrain: invalid_argument at reorderer_of.{fixed}: "
                                  f"derived from the topology, not an option",
                                  "invalid_argument", f"reorderer_of.{fixed}")
    return Reorderer([m["dp"] for m in o["modules"]], o["microbatches"],
                     names=[m["name"] for m in o["modules"]], stages=o["stages"], **options)


#: Keys of a field of a link (``shapes[l]["fields"][k]``) and their defaults.
_FIELD_KEYS = {"name": None, "hidden": None, "rows": None, "elem_size": 4, "dtype": None,
               "split": "hidden", "differentiable": True}


def link_fields(shape: Mapping[str, Any], link: int = 0) -> list[dict[str, Any]]:
    """The fields of one link's shape, each a dict of :data:`_FIELD_KEYS`
    with defaults filled in: a single-tensor shape (``hidden``, ``rows``,
    ``elem_size``) is one field named ``"hidden"``; ``{"fields": [...]}``
    lists them (``name``, ``hidden``, ``rows``, optional ``elem_size`` (4),
    ``split`` (``"hidden"`` or ``"rows"``) and ``differentiable`` (True)).
    A ``dtype`` (NumPy's or torch's: anything with ``itemsize``) may give
    the element size instead of ``elem_size``. Raises :class:`ParseError`
    naming an unknown or missing key."""
    def checked(d: Any, where: str, allowed: set, required: tuple) -> None:
        if not isinstance(d, Mapping):
            raise InvalidArgument(f"disttrain: invalid_argument at {where}: expected a dict, got "
                                  f"{type(d).__name__}", "invalid_argument", where)
        extra = sorted(set(d) - allowed)
        if extra:
            raise ParseError(f"disttrain: parse_error at {where}.{extra[0]}: unknown key "
                             f"(allowed: {', '.join(sorted(allowed))})", "parse_error",
                             f"{where}.{extra[0]}")
        for k in required:
            if k not in d:
                raise ParseError(f"disttrain: parse_error at {where}.{k}: missing",
                                 "parse_error", f"{where}.{k}")
    def sized(f: dict, given: Mapping[str, Any], where: str) -> dict:
        if "elem_size" not in given and f["dtype"] is not None:
            size = getattr(f["dtype"], "itemsize", None)
            if not isinstance(size, int):
                raise InvalidArgument(f"disttrain: invalid_argument at {where}.dtype: "
                                      f"{f['dtype']!r} has no itemsize", "invalid_argument",
                                      f"{where}.dtype")
            f["elem_size"] = size
        return f
    if isinstance(shape, Mapping) and "fields" in shape:
        checked(shape, f"shapes[{link}]", {"fields"}, ())
        fs = shape["fields"]
        if not isinstance(fs, Sequence) or isinstance(fs, (str, Mapping)) or not fs:
            raise InvalidArgument(f"disttrain: invalid_argument at shapes[{link}].fields: expected "
                                  f"a non-empty list of dicts", "invalid_argument",
                                  f"shapes[{link}].fields")
        out = []
        for k, f in enumerate(fs):
            checked(f, f"shapes[{link}].fields[{k}]", set(_FIELD_KEYS), ("name", "hidden", "rows"))
            out.append(sized({**_FIELD_KEYS, **f}, f, f"shapes[{link}].fields[{k}]"))
        return out
    checked(shape, f"shapes[{link}]", {"hidden", "rows", "elem_size", "dtype"}, ("hidden", "rows"))
    return [sized({**_FIELD_KEYS, **shape, "name": "hidden"}, shape, f"shapes[{link}]")]


def _bind_args(t: TopologyLike, sample_map: Mapping[str, Any],
               shapes: Sequence[Mapping[str, Any]], buckets: int, split_backward: bool,
               zero_bubble: bool) -> tuple:
    """The leading arguments of ``_core.bind_rank`` / ``_core.validate_world``."""
    if isinstance(shapes, Mapping) or not isinstance(shapes, Sequence):
        raise InvalidArgument("disttrain: invalid_argument at shapes: expected a list of dicts "
                              "(one per chain link)", "invalid_argument", "shapes")
    n = len(sample_map["id"])
    fields = [link_fields(s, link) for link, s in enumerate(shapes)]
    rows = _np.zeros((sum(len(fs) for fs in fields), n), dtype=_np.int64)
    hidden, elem, names, split, diff = [], [], [], [], []
    g = 0
    for link, fs in enumerate(fields):
        for k, f in enumerate(fs):
            where = f"shapes[{link}]" + (f".fields[{k}]" if len(fs) > 1 else "")
            r = _np.asarray(f["rows"])
            if r.shape != (n,) or r.dtype.kind not in "ui":
                raise InvalidArgument(f"disttrain: invalid_argument at {where}.rows: expected "
                                      f"{n} integers (one per sample of the map), got shape "
                                      f"{r.shape} dtype {r.dtype}", "invalid_argument",
                                      f"{where}.rows")
            if f["split"] not in ("hidden", "rows"):
                raise InvalidArgument(f"disttrain: invalid_argument at {where}.split: must be "
                                      f"'hidden' or 'rows', got {f['split']!r}",
                                      "invalid_argument", f"{where}.split")
            rows[g] = r
            g += 1
            hidden.append(int(f["hidden"]))
            elem.append(int(f["elem_size"]))
            names.append(str(f["name"]))
            split.append(0 if f["split"] == "hidden" else 1)
            diff.append(bool(f["differentiable"]))
    u32 = lambda a: _np.ascontiguousarray(a, dtype=_np.uint32)  # noqa: E731
    return (_topology_text(t), int(buckets), bool(split_backward), bool(zero_bubble),
            _np.ascontiguousarray(sample_map["id"], dtype=_np.uint64),
            u32(sample_map["microbatch"]), u32(sample_map["replica"]), u32(sample_map["offset"]),
            int(sample_map["microbatches"]), [int(d) for d in sample_map["dp"]], rows, hidden,
            elem, [len(fs) for fs in fields], names, split, diff)


_ORDERS = ("bound", "rendezvous")


def _order(order: str) -> bool:
    if order not in _ORDERS:
        raise InvalidArgument(f"disttrain: invalid_argument at order: must be one of {_ORDERS}, "
                              f"got {order!r}", "invalid_argument", "order")
    return order == "rendezvous"


def bind_rank(t: TopologyLike, sample_map: Mapping[str, Any],
              shapes: Sequence[Mapping[str, Any]],
              rank: int, *, buckets: int = 1, split_backward: bool = False,
              zero_bubble: bool = False, index: bool = False,
              order: str = "bound") -> Program:
    """The program global rank ``rank`` runs in one iteration (C++
    ``bind_rank`` over ``chain_program(t, {microbatches, split_backward,
    buckets, zero_bubble})``; ``zero_bubble``: ZB-H1's order on every chain
    stage, with B and W apart): every point-to-point op names its peer, bytes and tag.

    ``sample_map``: the sample map, a :func:`reorder` result (``id``,
    ``microbatch``, ``replica``, ``offset``, ``microbatches``, ``dp``) over
    the topology's modules that own ranks (:func:`reorderer_of`). ``shapes``:
    one dict per chain link (chain stage c -> c + 1): ``hidden`` (elements
    per row), ``rows`` (rows per sample, in the map's row order) and optional
    ``elem_size`` (bytes per element, 4); or, for a link that carries several
    tensors, ``{"fields": [...]}`` with one such dict per field plus its
    ``name`` and optional ``split`` (``"hidden"``/``"rows"``) and
    ``differentiable`` (True; a field that is not travels forward only)
    (:func:`link_fields`). All fields of a link travel in one message per
    pair of ranks, each field's part at a multiple of 16 bytes.

    Returns a dict: ``rank``, ``chain_stage``, ``dp_group`` (ranks reducing
    its gradient buckets), ``fields`` (the most fields of a link at the
    rank's ends), ``input_elements`` / ``output_elements`` (int64 per
    (microbatch, chunk, field) at ``(j * chunks + c) * fields + f``: the
    activation buffers received and sent, 0 past a link's fields), and one entry
    per op, in program order: ``kind`` (int32 codes into :data:`OP_KINDS`),
    ``stage``, ``microbatch``, ``peer`` (global rank, -1 for compute),
    ``bucket``, ``tag``, ``link``, ``phase`` (0 crossing, 1 TP fan-out),
    ``message``, ``bytes`` and ``elements`` (int64; elements of all fields
    together), ``stamp`` (uint64: the
    message's plan stamp, equal in the sender's and the receiver's programs
    iff both were bound from the same inputs), ``batch`` (int32: the op's
    batch of point-to-point ops issued together, C++ ``p2p_batches``; -1 for
    other ops), and ``blocks``: per
    point-to-point op (None otherwise) an int64 ``(nblocks, 6)`` array of
    copy blocks ``(src_offset, dst_offset, rows, cols, src_ld, dst_ld)``
    (element units): a send's copy its source buffer into the packed message
    (the source: the output, or the input gradient, for phase 0; the received
    input, or output gradient, for a fan-out), a receive's copy the packed
    message into its destination buffer (the input, or the output gradient):
    ``dst[dst_offset + i * dst_ld + c] = src[src_offset + i * src_ld + c]``
    for ``i < rows``, ``c < cols``. ``parts``: per point-to-point op an
    int64 ``(fields, 3)`` array, per field of its link ``(byte offset of its
    part in the message, elements, blocks)``; ``blocks`` (and ``index``) list
    the fields' blocks one field after the other, each field's in its own
    element units and relative to its part. With ``index=True``, also ``index``: the
    same as one int64 array per message (8 bytes per element moved: for
    small programs and tests): a send is ``source[index]``, a receive
    ``destination[index] = message``. Buffers hold the replica's samples of
    the microbatch in cell order, ``rows x hidden`` row-major each. Every rank
    computes the same program for the same inputs.

    ``order``: ``"bound"`` (each receive just before the op that reads it;
    runs where sends are buffered: MPI, gloo) or ``"rendezvous"`` (C++
    ``order_for_rendezvous``: every message in its round, on both sides, so
    the program runs where a send waits for its receive, as on NCCL;
    :class:`disttrain.torch.Runner` binds so).
    """
    args = _bind_args(t, sample_map, shapes, buckets, split_backward, zero_bubble)
    return Program.from_dict(_core.bind_rank(args, int(rank), bool(index), _order(order)))


def validate_world(t: TopologyLike, sample_map: Mapping[str, Any],
                   shapes: Sequence[Mapping[str, Any]],
                   *, buckets: int = 1, split_backward: bool = False,
                   zero_bubble: bool = False, order: str = "rendezvous",
                   p2p: str = "rendezvous") -> dict[str, int]:
    """Binds every rank's program (as :func:`bind_rank` with ``order``) and
    checks them together (C++ ``validate_bound``): every message matched in
    program order with the same tag, bytes and stamp, every bucket joined,
    and no deadlock under ``p2p``: ``"buffered"`` (MPI, gloo: a send does not
    wait) or ``"rendezvous"`` (NCCL as :class:`disttrain.torch.Runner`
    issues the ops: a send waits for its receive, each rank issues its
    point-to-point ops in batches and waits for each). Returns ``ops``,
    ``messages`` and ``bytes``; raises :class:`ScheduleError` naming the op
    (for a deadlock: each blocked rank, the op it waits at and the rank it
    waits for)."""
    if p2p not in ("buffered", "rendezvous"):
        raise InvalidArgument(f"disttrain: invalid_argument at p2p: must be 'buffered' or "
                              f"'rendezvous', got {p2p!r}", "invalid_argument", "p2p")
    args = _bind_args(t, sample_map, shapes, buckets, split_backward, zero_bubble)
    return _core.validate_world(args, _order(order), p2p)


#: Tracks of :func:`trace_json` events (C++ ``exec_track``).
TRACKS = ("compute", "wait", "transfer")


def trace_json(t: TopologyLike, sample_map: Mapping[str, Any],
               shapes: Sequence[Mapping[str, Any]],
               events: Sequence[Sequence[Any]], *, buckets: int = 1,
               split_backward: bool = False, zero_bubble: bool = False,
               order: str = "rendezvous") -> str:
    """A measured iteration as Chrome/Perfetto trace JSON text, written by
    the simulator's trace writer (C++ ``exec_trace_json``: the tracks, names
    and colours of a simulated iteration, so both open side by side in
    ui.perfetto.dev). ``events``: ``(rank, op index, start, end, track)``
    per interval, seconds from each rank's iteration start, track one of
    :data:`TRACKS`, op indices into the programs bound as :func:`bind_rank`
    binds them with the same options (``disttrain.torch.Runner(record=True)``
    records them; gather every rank's, e.g. with ``all_gather_object``)."""
    ev = list(events)
    col = lambda k, dt: _np.ascontiguousarray([e[k] for e in ev], dtype=dt)  # noqa: E731
    track = []
    for i, e in enumerate(ev):
        if e[4] not in TRACKS:
            raise InvalidArgument(f"disttrain: invalid_argument at events[{i}].track: must be one "
                                  f"of {TRACKS}, got {e[4]!r}", "invalid_argument",
                                  f"events[{i}].track")
        track.append(TRACKS.index(e[4]))
    args = _bind_args(t, sample_map, shapes, buckets, split_backward, zero_bubble)
    return _core.trace_json(args, _order(order), col(0, _np.int32), col(1, _np.int32),
                            col(2, _np.float64), col(3, _np.float64),
                            _np.ascontiguousarray(track, dtype=_np.int32))


def cell(sample_map: Mapping[str, Any], module: int, replica: int, microbatch: int) -> _np.ndarray:
    """Sample ids of ``replica`` of reorder module ``module`` in ``microbatch``,
    in offset order (the order of the replica's activation buffers)."""
    k = int(module)
    mask = (sample_map["microbatch"] == microbatch) & (sample_map["replica"][:, k] == replica)
    return sample_map["id"][mask][_np.argsort(sample_map["offset"][mask, k], kind="stable")]
