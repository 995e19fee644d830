"""Errors: disttrain.Error subclasses carrying the C++ errc and where."""
import pickle

import numpy as np
import pytest

import disttrain
from disttrain import errors


def raises(cls, errc, where, fn, *a, **kw):
    with pytest.raises(cls) as info:
        fn(*a, **kw)
    e = info.value
    assert isinstance(e, disttrain.Error)
    assert e.errc == errc
    assert e.where == where
    assert str(e).startswith(f"disttrain: {errc}")
    return e


def test_unknown_key_is_a_parse_error_with_a_suggestion():
    sc = disttrain.presets.scenario("mllm-7b")
    sc["cluster"]["num_gpu"] = 8
    e = raises(disttrain.ParseError, "parse_error", "cluster.num_gpu", disttrain.plan, sc)
    assert "did you mean 'num_gpus'" in e.message
    assert isinstance(e, ValueError)


def test_planner_option_out_of_range():
    raises(disttrain.InvalidArgument, "invalid_argument", "planner.max_side_pp", disttrain.plan,
           "mllm-7b", max_side_pp=0)


def test_planner_option_mistyped():
    raises(disttrain.ParseError, "parse_error", "planner.tp_candidates[0]", disttrain.plan,
           "mllm-7b", tp_candidates=["two"])


def test_unknown_planner_key_in_scenario():
    sc = disttrain.presets.scenario("mllm-7b")
    sc["planner"] = {"max_side_p": 1}
    raises(disttrain.ParseError, "parse_error", "planner.max_side_p", disttrain.plan, sc)


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        disttrain.plan("mllm-7b", max_sidepp=1)
    with pytest.raises(TypeError):
        disttrain.reorder(np.ones((4, 1)), 2, 1, balanc="lpt")


def test_infeasible():
    sc = disttrain.presets.scenario("paper-72b")
    sc["cluster"]["num_gpus"] = 4
    e = raises(disttrain.Infeasible, "infeasible", "qwen2-72b/stage 0", disttrain.plan, sc)
    assert "GB" in e.message


def test_unknown_preset():
    raises(disttrain.InvalidArgument, "invalid_argument", "preset", disttrain.presets.scenario,
           "nope")


def test_missing_file():
    raises(disttrain.ParseError, "parse_error", "/nonexistent/x.json", disttrain.plan,
           "/nonexistent/x.json")


def test_evaluate_batch_mismatch():
    r = disttrain.plan("mllm-7b")
    sc = disttrain.presets.scenario("mllm-7b")
    sc["global_batch_size"] *= 2
    raises(disttrain.InvalidArgument, "invalid_argument", "plan.global_batch", disttrain.evaluate,
           r, sc)


def test_simulate_runs_interleaved_and_refuses_gpipe():
    r = disttrain.plan_baseline("mllm-70b")  # Megatron-LM-style: interleaved 1F1B
    assert any(m["virtual_stages"] > 1 for m in r["plan"]["modules"])
    s = disttrain.simulate(r, "mllm-70b")
    assert s["iteration_time_s"] > r["iteration_time_s"] * 0.9
    plan = dict(r["plan"], schedule="gpipe")
    plan["modules"] = [dict(m, virtual_stages=1) for m in plan["modules"]]
    with pytest.raises(disttrain.Unsupported) as info:
        disttrain.simulate(plan, "mllm-70b")
    e = info.value
    assert isinstance(e, NotImplementedError) and e.errc == "unsupported"
    assert e.where == "plan.schedule"


def test_reorder_errors():
    c = np.ones((16, 2))
    raises(disttrain.InvalidArgument, "invalid_argument", "reorder_options.modules[1].dp",
           disttrain.reorder, c, [2, 0], 2)
    raises(disttrain.InvalidArgument, "invalid_argument", "batch[0].cost", disttrain.reorder, c,
           [2], 2)
    bad = c.copy()
    bad[3, 1] = -1.0
    raises(disttrain.InvalidArgument, "invalid_argument", "batch[3].cost[1]", disttrain.reorder,
           bad, [2, 2], 2)
    bad[3, 1] = np.nan
    raises(disttrain.InvalidArgument, "invalid_argument", "batch[3].cost[1]", disttrain.reorder,
           bad, [2, 2], 2)
    raises(disttrain.InvalidArgument, "invalid_argument", "batch", disttrain.reorder, c, [2, 2],
           32)
    ids = np.arange(16)
    ids[5] = 4
    raises(disttrain.InvalidArgument, "invalid_argument", "batch[5].id", disttrain.reorder, c,
           [2, 2], 2, ids=ids)
    raises(disttrain.InvalidArgument, "invalid_argument", "ids", disttrain.reorder, c, [2, 2], 2,
           ids=-np.arange(16))
    raises(disttrain.InvalidArgument, "invalid_argument", "ids", disttrain.reorder, c, [2, 2], 2,
           ids=np.arange(15))
    raises(disttrain.InvalidArgument, "invalid_argument", "costs", disttrain.reorder,
           np.ones((16, 9)), [1] * 8, 2)
    raises(disttrain.InvalidArgument, "invalid_argument", "reorder_options.modules",
           disttrain.reorder, np.ones((16, 9)), [1] * 9, 2)
    raises(disttrain.ParseError, "parse_error", "reorder_options.balance", disttrain.reorder, c,
           [2, 2], 2, balance="best")
    raises(disttrain.Infeasible, "infeasible", "reorder_options.modules[0].dp", disttrain.reorder,
           np.ones((8, 1)), [8], 2, equal_count=True)


def test_errors_pickle_and_classes():
    e = errors.Infeasible("disttrain: infeasible at x: y", "infeasible", "x", "y")
    f = pickle.loads(pickle.dumps(e))
    assert type(f) is errors.Infeasible and (f.errc, f.where, f.message, str(f)) == (
        "infeasible", "x", "y", str(e))
    assert errors.error_class("timeout") is disttrain.Timeout
    assert errors.error_class("nope") is disttrain.Error
