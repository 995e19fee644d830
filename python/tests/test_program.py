"""The topology and the bound per-rank programs from Python: round trips, the
rank numbering, errors, determinism, and the programs' data movement checked
end to end in NumPy (every rank's sends packed with the index arrays, every
receive unpacked, each receiver's buffer holding exactly its samples' rows)."""
import json
import subprocess
import sys

import numpy as np
import pytest

import disttrain

MODULES = [{"name": "vit", "role": "encoder", "tp": 2, "dp": 2},
           {"name": "llm", "role": "backbone", "tp": 2, "pp": 2, "dp": 3},
           {"name": "gen", "role": "generator", "dp": 2}]


def test_topology_round_trip_and_numbering():
    t = disttrain.topology(MODULES)
    assert disttrain.topology(t) == t  # its output is a valid input
    assert [m["name"] for m in t["modules"]] == ["vit", "llm", "gen"]
    assert t["modules"][2] == {"name": "gen", "role": "generator", "tp": 1, "pp": 1, "dp": 2,
                               "trainable": True, "colocated": False}
    assert t["world_size"] == 4 + 12 + 2 and t["backbone"] == 1
    assert t["chain"] == [[0, 0], [1, 0], [1, 1], [2, 0]] and t["owning_modules"] == [0, 1, 2]
    # rank = base(module) + (stage * dp + replica) * tp + tp_rank (the C++ doc's example: 9)
    assert t["ranks"][9] == {"module": 1, "stage": 0, "replica": 2, "tp_rank": 1,
                             "chain_stage": 1}
    assert t["describe"] == "vit TP2 PP1 DP2 -> llm TP2 PP2 DP3 -> gen TP1 PP1 DP2"


def test_colocated_and_frozen():
    t = disttrain.topology([{"name": "vit", "role": "encoder", "colocated": True},
                            {"name": "llm", "role": "backbone", "dp": 2},
                            {"name": "gen", "role": "generator", "trainable": False}])
    assert t["world_size"] == 3 and t["owning_modules"] == [1, 2]
    assert t["describe"] == "vit (colocated) -> llm TP1 PP1 DP2 -> gen TP1 PP1 DP1 (frozen)"
    o = disttrain.reorder_options_of(t, 4)
    assert [m["dp"] for m in o["modules"]] == [2, 1] and o["microbatches"] == 4


def test_topology_of_plan_agrees_with_the_plan():
    r = disttrain.plan("mllm-7b")
    t = disttrain.topology_of(r)
    for m, p in zip(t["modules"], r["plan"]["modules"]):
        assert (m["name"], m["tp"], m["pp"], m["dp"], m["colocated"]) == \
            (p["name"], p["tp"], p["pp"], p["dp"], p["colocated"])
    model = disttrain.presets.model("mllm-7b")
    model["modules"][0]["frozen"] = True
    assert not disttrain.topology_of(r["plan"], model)["modules"][0]["trainable"]


def test_the_sampler_scores_stages_as_the_plan_does():
    """One derivation of the reorder options (issue 40): the topology of a plan
    carries its layers per stage, so the reorderer a sampler builds from it
    (reorderer_of) weights each stage by its layers, as simulate_plan does."""
    r = disttrain.plan("mllm-70b")
    t = disttrain.topology_of(r)
    o = disttrain.reorder_options_of(t, 8)
    stages = iter(o["stages"])
    for k, mi in enumerate(t["owning_modules"]):
        layers = r["plan"]["modules"][mi]["layers"]
        assert t["modules"][mi]["layers"] == layers
        for n in layers:
            s = next(stages)
            assert s["module"] == k
            assert s["forward_scale"] == pytest.approx(n / sum(layers), rel=1e-15)
            assert s["backward_scale"] == 2 * s["forward_scale"]
    assert disttrain.reorderer_of(t, 8).options["stages"] == o["stages"]
    # By hand: layers are optional (equal stages without them) and checked.
    hand = disttrain.topology([{"name": "llm", "role": "backbone", "pp": 2, "layers": [1, 3]}])
    assert [s["forward_scale"] for s in disttrain.reorder_options_of(hand, 2)["stages"]] == \
        [0.25, 0.75]
    with pytest.raises(disttrain.Error) as info:
        disttrain.topology([{"name": "llm", "role": "backbone", "pp": 2, "layers": [4]}])
    assert info.value.where == "topology.modules[0].layers"


@pytest.mark.parametrize("mods, errc, where", [
    ([{"name": "a", "role": "backbone", "dp": 0}], "invalid_argument", "topology.modules[0].dp"),
    ([{"name": "a", "role": "backbone"}, {"name": "a", "role": "generator"}],
     "invalid_argument", "topology.modules[1].name"),
    ([{"name": "a", "role": "backbone", "pp_size": 2}], "parse_error",
     "topology.modules[0].pp_size"),
    ([{"name": "a", "role": "decoder"}], "invalid_argument", "topology.modules[0].role"),
    ([{"name": "a", "role": "encoder"}], "invalid_argument", "topology.modules"),
])
def test_topology_errors(mods, errc, where):
    with pytest.raises(disttrain.Error) as info:
        disttrain.topology(mods)
    assert (info.value.errc, info.value.where) == (errc, where)


def batch(t, n=12, m=4, seed=3):
    g = np.random.default_rng(seed)
    k = len(t["owning_modules"])
    ids = g.permutation(1000)[:n].astype(np.uint64)  # unsorted, not 0..n-1
    rows = {"img": g.integers(1, 4, n), "seq": g.integers(3, 9, n)}
    cmap = disttrain.reorderer_of(t, m).assign(g.lognormal(size=(n, k)), ids)
    shapes = []
    for module, _ in t["chain"][:-1]:
        enc = t["modules"][module]["role"] == "encoder"
        shapes.append({"hidden": 4, "rows": rows["img"] if enc else rows["seq"], "elem_size": 8})
    return cmap, shapes


def programs(t, cmap, shapes, index=True):
    return [disttrain.bind_rank(t, cmap, shapes, r, index=index) for r in range(t["world_size"])]


def pack(src, blocks, elements):
    """A send's message from its copy blocks (src_off, dst_off, rows, cols, src_ld, dst_ld)."""
    out = np.full(elements, np.nan)
    for so, do, r, c, sl, dl in blocks:
        for i in range(r):
            out[do + i * dl:do + i * dl + c] = src[so + i * sl:so + i * sl + c]
    return out


def unpack(msg, blocks, dst):
    for so, do, r, c, sl, dl in blocks:
        for i in range(r):
            dst[do + i * dl:do + i * dl + c] = msg[so + i * sl:so + i * sl + c]


def test_program_columns_and_matching():
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    ps = programs(t, cmap, shapes)
    kinds = disttrain.OP_KINDS
    sends, recvs = {}, {}
    for p in ps:
        n = len(p["kind"])
        for col in ("stage", "microbatch", "peer", "bucket", "tag", "link", "phase", "message",
                    "bytes", "elements"):
            assert p[col].shape == (n,)
        assert len(p["index"]) == len(p["blocks"]) == n and p["input_elements"].shape == (4,)
        assert kinds[p["kind"][-1]] == "optimizer_step"
        for i in range(n):
            k = kinds[p["kind"][i]]
            if k.startswith(("send", "recv")):
                assert p["bytes"][i] == 8 * p["elements"][i] == 8 * len(p["index"][i])
                b = p["blocks"][i]
                assert b.shape[1] == 6 and (b[:, 2] * b[:, 3]).sum() == p["elements"][i]
                key = (k[5:], int(p["microbatch"][i]), int(p["link"][i]), int(p["message"][i]))
                side = sends if k.startswith("send") else recvs
                side[key + ((p["rank"], int(p["peer"][i])) if side is sends else
                            (int(p["peer"][i]), p["rank"]))] = (int(p["tag"][i]),
                                                                int(p["elements"][i]),
                                                                int(p["stamp"][i]))
            else:
                assert p["index"][i] is None and p["blocks"][i] is None and p["peer"][i] == -1
    # every send has its receive: same tag, same size, same plan stamp
    assert sends and sends == recvs


def test_stamps_differ_when_the_inputs_do():
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    other = [dict(s) for s in shapes]
    other[0]["rows"] = other[0]["rows"].copy()
    other[0]["rows"][0] += 1  # one sample's image rows
    r = t["ranks"].index(next(c for c in t["ranks"] if c["chain_stage"] == 1))
    a = disttrain.bind_rank(t, cmap, shapes, r)
    b = disttrain.bind_rank(t, cmap, other, r)
    p2p = a["peer"] >= 0
    assert (a["stamp"][p2p] != 0).all()
    assert not np.array_equal(a["stamp"][p2p], b["stamp"][p2p])


@pytest.mark.parametrize("mode", ["index", "blocks"])
def test_data_movement_end_to_end(mode):
    """Forward activations: each sender fills its output buffer with values naming
    (sample, row, column); after every send / receive of the world (messages
    packed and unpacked with the index arrays, or the copy blocks), each
    receiver's input buffer holds its own samples' rows in cell order."""
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    ps = programs(t, cmap, shapes, index=mode == "index")
    if mode == "blocks":
        assert "index" not in ps[0]
    kinds = disttrain.OP_KINDS
    row_of = {int(i): n for n, i in enumerate(cmap["id"])}

    def pattern(link, ids):
        h = shapes[link]["hidden"]
        return np.concatenate([[int(i) * 1e4 + r * 10 + c for r in range(shapes[link]["rows"]
                                                                         [row_of[int(i)]])
                                for c in range(h)] for i in ids] or [np.zeros(0)])

    def cell_ids(rank, j):
        c = t["ranks"][rank]
        return disttrain.cell(cmap, t["owning_modules"].index(c["module"]), c["replica"], j)

    for j in range(4):
        out = {p["rank"]: pattern(p["chain_stage"], cell_ids(p["rank"], j))
               if p["chain_stage"] < len(t["chain"]) - 1 else None for p in ps}
        inp = {p["rank"]: np.full(p["input_elements"][j], np.nan) for p in ps}
        for phase in (0, 1):
            wire = {}
            for p in ps:
                for i, k in enumerate(p["kind"]):
                    if (kinds[k], p["microbatch"][i], p["phase"][i]) == ("send_act", j, phase):
                        src = out[p["rank"]] if phase == 0 else inp[p["rank"]]
                        wire[(p["rank"], int(p["peer"][i]), int(p["link"][i]),
                              int(p["message"][i]))] = (
                            src[p["index"][i]] if mode == "index" else
                            pack(src, p["blocks"][i], int(p["elements"][i])))
            for p in ps:
                for i, k in enumerate(p["kind"]):
                    if (kinds[k], p["microbatch"][i], p["phase"][i]) == ("recv_act", j, phase):
                        msg = wire.pop((int(p["peer"][i]), p["rank"], int(p["link"][i]),
                                        int(p["message"][i])))
                        if mode == "index":
                            inp[p["rank"]][p["index"][i]] = msg
                        else:
                            unpack(msg, p["blocks"][i], inp[p["rank"]])
            assert not wire
        for p in ps:
            if p["chain_stage"] > 0:
                want = pattern(p["chain_stage"] - 1, cell_ids(p["rank"], j))
                np.testing.assert_array_equal(inp[p["rank"]], want)
                assert out[p["rank"]] is None or len(out[p["rank"]]) == p["output_elements"][j]


def test_bind_errors():
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.bind_rank(t, cmap, shapes, t["world_size"])
    assert e.value.where == "bind.rank"
    other = disttrain.topology([dict(m, dp=1) for m in MODULES])
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.bind_rank(other, cmap, shapes, 0)
    assert e.value.where == "bind.map.dp[0]"
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.bind_rank(t, cmap, shapes[:-1], 0)
    assert e.value.where == "shapes"
    bad = [dict(s) for s in shapes]
    bad[1]["rows"] = bad[1]["rows"][:-1]
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.bind_rank(t, cmap, bad, 0)
    assert e.value.where == "shapes[1].rows"
    broken = dict(cmap, offset=np.zeros_like(cmap["offset"]))
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.bind_rank(t, broken, shapes, 0)
    assert e.value.where.startswith("reorder_result.samples[")


SCRIPT = r"""
import hashlib, sys, numpy as np, disttrain
sys.path.insert(0, sys.argv[1])
import test_program as tp
t = disttrain.topology(tp.MODULES)
cmap, shapes = tp.batch(t, n=40, m=3)
h = hashlib.sha256()
for p in tp.programs(t, cmap, shapes):
    for k in sorted(p):
        v = p[k]
        h.update(k.encode())
        if k in ("index", "blocks"):
            for a in v:
                h.update(b"-" if a is None else a.tobytes() + repr(a.shape).encode())
        else:
            h.update(v.tobytes() if hasattr(v, "tobytes") else repr(v).encode())
print(h.hexdigest())
"""


def test_two_processes_bind_the_same_programs():
    here = str(__import__("pathlib").Path(__file__).parent)
    a, b = (subprocess.run([sys.executable, "-c", SCRIPT, here], check=True, capture_output=True,
                           text=True).stdout for _ in range(2))
    assert len(a.strip()) == 64 and a == b


def test_rendezvous_order_batches_and_validate_world():
    """bind_rank(order="rendezvous") permutes the bound program's ops, its
    batch column numbers the runs of point-to-point ops, and validate_world
    finds no deadlock under NCCL's semantics (or MPI's)."""
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    for r in range(t["world_size"]):
        a = disttrain.bind_rank(t, cmap, shapes, r)
        b = disttrain.bind_rank(t, cmap, shapes, r, order="rendezvous")
        key = lambda p, i: (int(p["kind"][i]), int(p["microbatch"][i]), int(p["tag"][i]),  # noqa
                            int(p["peer"][i]), int(p["stamp"][i]), int(p["bucket"][i]))
        assert sorted(key(a, i) for i in range(len(a["kind"]))) == \
            sorted(key(b, i) for i in range(len(b["kind"])))
        p2p = np.array([disttrain.OP_KINDS[k].startswith(("send", "recv")) for k in b["kind"]])
        assert ((b["batch"] >= 0) == p2p).all()
        got = b["batch"][p2p]
        assert got[0] == 0 and (np.diff(got) >= 0).all() and (np.diff(got) <= 1).all()
    for p2p in ("rendezvous", "buffered"):
        rep = disttrain.validate_world(t, cmap, shapes, p2p=p2p)
        assert rep["messages"] > 0 and rep["bytes"] > 0
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.validate_world(t, cmap, shapes, p2p="nccl")
    assert e.value.where == "p2p"
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.bind_rank(t, cmap, shapes, 0, order="early")
    assert e.value.where == "order"


def test_trace_json_of_measured_events():
    """A measured iteration (here: made-up intervals, one per op) through the
    simulator's trace writer: one slice per op, named as in a simulation."""
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    events = []
    for r in range(t["world_size"]):
        p = disttrain.bind_rank(t, cmap, shapes, r, order="rendezvous")
        for i, k in enumerate(p["kind"]):
            recv = disttrain.OP_KINDS[k].startswith("recv")
            events.append((r, i, 0.001 * i, 0.001 * i + 0.0005, "wait" if recv else "compute"))
    d = json.loads(disttrain.trace_json(t, cmap, shapes, events))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    slices = [e for e in ev if e.get("ph") == "X"]
    assert {e["pid"] for e in slices} == set(range(t["world_size"]))
    assert any(e["name"].startswith("F") for e in slices)
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.trace_json(t, cmap, shapes, [(0, 10 ** 6, 0.0, 1.0, "compute")])
    assert e.value.where == "events[0]"
    with pytest.raises(disttrain.InvalidArgument) as e:
        disttrain.trace_json(t, cmap, shapes, [(0, 0, 0.0, 1.0, "idle")])
    assert e.value.where == "events[0].track"


def test_op_kind_enum_and_no_builtin_shadowed():
    """OpKind is built from the C++ names; no public function or method of
    the package takes a parameter named like a builtin (``map``, ``id``, ...)."""
    import builtins
    import inspect

    import disttrain.torch as dtt
    assert [k.name for k in disttrain.OpKind] == list(disttrain.OP_KINDS)
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    p = disttrain.bind_rank(t, cmap, shapes, 0)
    assert p["kind"][-1] == disttrain.OpKind.optimizer_step
    shadowing = []
    for mod in (disttrain, dtt):
        for name in mod.__all__:
            obj = getattr(mod, name)
            fns = [obj] if inspect.isfunction(obj) else \
                [f for _, f in inspect.getmembers(obj, inspect.isfunction)] \
                if inspect.isclass(obj) and obj.__module__.startswith("disttrain") else []
            for f in fns:
                shadowing += [f"{f.__qualname__}({a})" for a in inspect.signature(f).parameters
                              if hasattr(builtins, a)]
    assert not shadowing, shadowing


def test_bind_fields_one_message_per_pair_with_aligned_parts():
    # Each link also carries int64 "pos" (one per row, no gradient) and a
    # differentiable float "aux" (one row of 3 per sample).
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    n = len(cmap["id"])
    multi = [{"fields": [dict(s, name="hidden"),
                         {"name": "pos", "hidden": 1, "rows": s["rows"], "dtype": np.dtype(np.int64),
                          "split": "rows", "differentiable": False},
                         {"name": "aux", "hidden": 3, "rows": np.ones(n, dtype=np.int64),
                          "elem_size": 2}]} for s in shapes]
    one = programs(t, cmap, shapes, index=False)
    three = programs(t, cmap, multi, index=False)
    assert disttrain.validate_world(t, cmap, multi)["messages"] > 0
    pos_bytes = 0
    for p1, p3 in zip(one, three):
        assert p1["fields"] == 1 and p3["fields"] == 3
        assert list(p3["kind"]) == list(p1["kind"]) and list(p3["peer"]) == list(p1["peer"])
        assert list(p3["input_elements"][0::3]) == list(p1["input_elements"])
        for i, parts in enumerate(p3["parts"]):
            if parts is None:
                continue
            (o0, e0, _), (o1, e1, _), (o2, e2, _) = parts.tolist()
            assert o0 == 0 and o1 >= e0 * 8 and o1 % 16 == 0 and o2 >= o1 + e1 * 8 and o2 % 16 == 0
            assert p3["bytes"][i] == o2 + e2 * 2
            assert p3["elements"][i] == e0 + e1 + e2
            if disttrain.OP_KINDS[p3["kind"][i]] in ("send_grad", "recv_grad"):
                assert e1 == 0  # "pos" is not differentiable
            pos_bytes += e1 * 8
    assert pos_bytes > 0


def test_link_fields_errors_name_the_key():
    t = disttrain.topology(MODULES)
    cmap, shapes = batch(t)
    base = {"name": "hidden", "hidden": 4, "rows": shapes[0]["rows"]}
    cases = [({"fields": []}, disttrain.InvalidArgument, "shapes[0].fields"),
             ({"fields": [dict(base, mask=1)]}, disttrain.ParseError, "shapes[0].fields[0].mask"),
             ({"fields": [{"hidden": 4, "rows": base["rows"]}]}, disttrain.ParseError,
              "shapes[0].fields[0].name"),
             ({"fields": [base, dict(base, split="cols")]}, disttrain.InvalidArgument,
              "shapes[0].fields[1].split"),
             ({"fields": [base, base]}, disttrain.InvalidArgument, "bind.shapes[0].fields[1].name"),
             ({"fields": [base, dict(base, name="x", dtype="f8")]}, disttrain.InvalidArgument,
              "shapes[0].fields[1].dtype"),
             ({"hidden": 4, "rows": base["rows"], "fields": [base]}, disttrain.ParseError,
              "shapes[0].hidden")]
    for bad, kind, where in cases:
        with pytest.raises(kind) as e:
            disttrain.bind_rank(t, cmap, [bad] + shapes[1:], 0)
        assert e.value.where == where, (bad, e.value)


def test_typed_records_frozen_mappings_with_dicts_round_trip():
    import dataclasses
    t = disttrain.topology(MODULES)
    assert isinstance(t, disttrain.Topology)
    assert t.ranks is t["ranks"] and t.world_size == 18 and t.modules[1]["name"] == "llm"
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.world_size = 3
    d = t.to_dict()
    assert type(d) is dict and d == t and t == d and disttrain.Topology.from_dict(d) == t
    assert disttrain.topology(d) == t and disttrain.topology(t) == t
    cmap, shapes = batch(t)
    assert isinstance(cmap, disttrain.SampleMap)
    assert cmap.ids is cmap["id"] and "ids" not in cmap and set(cmap) == set(cmap.to_dict())
    assert disttrain.SampleMap.from_dict(cmap.to_dict()) == cmap
    assert dict(cmap, offset=cmap.offset)["offset"] is cmap.offset  # dict(...) still works
    p = disttrain.bind_rank(t, cmap, shapes, 0)
    assert isinstance(p, disttrain.Program)
    assert p.nbytes is p["bytes"] and "index" not in p and p.index is None
    assert disttrain.OpKind(int(p.kind[0])) == disttrain.OpKind.F  # rank 0: the encoder's first F
    q = disttrain.bind_rank(t, cmap, shapes, 0, index=True)
    assert "index" in q and len(q.index) == len(q.kind)
    assert disttrain.Program.from_dict(q.to_dict()) == q and q != p
    # from_dict names an unknown or a missing key (the C++ outputs' keys are
    # checked so at every call: a new output key fails here first).
    with pytest.raises(disttrain.ParseError) as e:
        disttrain.Topology.from_dict(dict(d, extra=1))
    assert e.value.where == "Topology.extra"
    with pytest.raises(disttrain.ParseError) as e:
        disttrain.SampleMap.from_dict({k: v for k, v in cmap.items() if k != "dp"})
    assert e.value.where == "SampleMap.dp"
