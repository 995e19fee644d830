"""The reorderer from NumPy: shapes, dtypes, the map's invariants, agreement
with the C++ JSON form, input-order independence, threads."""
import threading

import numpy as np
import pytest

import disttrain


def costs(n=200, k=3, seed=0):
    return np.random.default_rng(seed).lognormal(0.0, 0.7, size=(n, k))


def check_map(res, c, dp, m):
    n, k = c.shape
    assert res["id"].dtype == np.uint64 and res["id"].shape == (n,)
    assert res["microbatch"].dtype == np.uint32 and res["microbatch"].shape == (n,)
    assert res["replica"].dtype == np.uint32 and res["replica"].shape == (n, k)
    assert res["offset"].dtype == np.uint32 and res["offset"].shape == (n, k)
    assert res["imbalance"].shape == (k,) and res["dp"] == list(dp) and res["microbatches"] == m
    assert res["microbatch"].max() < m
    for q in range(k):
        assert res["replica"][:, q].max() < dp[q]
        assert res["load"][q].shape == (m, dp[q])
        # Each (microbatch, replica) cell holds offsets 0..size-1, and its load is its costs' sum.
        cell = res["microbatch"].astype(np.int64) * dp[q] + res["replica"][:, q]
        for c_id in np.unique(cell):
            rows = np.flatnonzero(cell == c_id)
            assert sorted(res["offset"][rows, q]) == list(range(len(rows)))
            j, r = divmod(int(c_id), dp[q])
            assert res["load"][q][j, r] == pytest.approx(c[rows, q].sum(), rel=1e-12)
        np.testing.assert_allclose(res["load"][q].sum(), c[:, q].sum(), rtol=1e-12)


def test_round_trip_and_invariants():
    c = costs()
    res = disttrain.reorder(c, [2, 3, 2], 4)
    np.testing.assert_array_equal(res["id"], np.arange(len(c), dtype=np.uint64))
    check_map(res, c, [2, 3, 2], 4)
    assert res["iteration_time"] > 0


def test_agrees_with_the_cpp_json_form():
    c = costs(100, 2, 1)
    r = disttrain.Reorderer([2, 4], 5, names=["encoder", "backbone"])
    assert [m["name"] for m in r.options["modules"]] == ["encoder", "backbone"]
    res, js = r.assign(c), r.assign_json(c)
    assert js["iteration_time"] == res["iteration_time"]
    for s in js["samples"]:
        i = s["id"]
        assert res["microbatch"][i] == s["microbatch"]
        assert res["replica"][i].tolist() == s["replica"]
        assert res["offset"][i].tolist() == s["offset"]


def test_rows_follow_the_input_order_with_ids():
    c = costs(120, 2, 2)
    ids = np.arange(1000, 1120, dtype=np.int64)
    # slots="best": the order-independent mode (the default also weighs the arrival cut)
    base = disttrain.reorder(c, [3, 2], 4, ids=ids, slots="best")
    perm = np.random.default_rng(3).permutation(len(c))
    shuffled = disttrain.reorder(c[perm], [3, 2], 4, ids=ids[perm], slots="best")
    np.testing.assert_array_equal(shuffled["id"], ids[perm].astype(np.uint64))
    for key in ("microbatch", "replica", "offset"):
        np.testing.assert_array_equal(shuffled[key], base[key][perm])
    np.testing.assert_array_equal(base["id"], ids.astype(np.uint64))


def test_input_conversions():
    c = costs(64, 1, 4)
    ref = disttrain.reorder(c, 4, 2)
    for variant in (c[:, 0], c.astype(np.float32).astype(np.float64), np.asfortranarray(c),
                    c.tolist()):
        got = disttrain.reorder(variant, [4], 2)
        np.testing.assert_array_equal(got["replica"], ref["replica"])
    wide = np.zeros((64, 2))
    wide[:, 0] = c[:, 0]
    strided = wide[:, :1]  # not contiguous
    np.testing.assert_array_equal(disttrain.reorder(strided, 4, 2)["replica"], ref["replica"])


def test_results_own_their_memory():
    r = disttrain.Reorderer([2], 2)
    a = r.assign(costs(32, 1, 5))
    b = r.assign(costs(32, 1, 6))
    assert a["replica"].base is not b["replica"].base
    a2 = disttrain.Reorderer([2], 2).assign(costs(32, 1, 5))
    np.testing.assert_array_equal(a["replica"], a2["replica"])


def test_options_change_the_result_and_stages():
    c = costs(256, 1, 7)
    lpt = disttrain.reorder(c, 8, 4, balance="lpt", order="identity", slots="arrival")
    ref = disttrain.reorder(c, 8, 4)
    assert lpt["load"][0].max(axis=1).sum() >= ref["load"][0].max(axis=1).sum() - 1e-12
    staged = disttrain.Reorderer([2, 2], 4, stages=[(0, 1.0, 2.0), (1, 0.5, 1.0), (1, 0.5, 1.0)])
    assert len(staged.options["stages"]) == 3


def test_threads_get_the_same_answers():
    c = costs(2048, 3, 8)
    ref = disttrain.reorder(c, [16, 64, 8], 8)
    out = [None] * 4

    def work(i):
        out[i] = disttrain.reorder(c, [16, 64, 8], 8)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o in out:
        for key in ("microbatch", "replica", "offset"):
            np.testing.assert_array_equal(o[key], ref[key])


def test_per_microbatch_limits():
    """max_samples / max_tokens (C++ reorder_module): every cell keeps them,
    and a limit no split can keep raises Infeasible naming the sample."""
    rng = np.random.default_rng(3)
    n, dp, m = 120, [2, 4], 6
    tok = np.minimum(rng.lognormal(6.0, 0.8, size=(n, 2)), 4000).astype(np.uint32) + 1
    c = tok * rng.uniform(0.8, 1.2, size=(n, 2)) * 1e-6
    free = disttrain.reorder(c, dp, m)

    def cells(res, q):
        key = res["microbatch"].astype(np.int64) * dp[q] + res["replica"][:, q]
        return [np.flatnonzero(key == x) for x in np.unique(key)]

    # Limits an eighth of the way from the unlimited plan's fullest cell to the
    # mean cell. (A quarter no longer packs since the unlimited plan's cells
    # are better balanced, issue 41: its module-1 peak fell from 5420 to 4755
    # tokens, and the reorderer, before and after, packs module 1 at 4400
    # tokens but not at 4300.)
    max_tokens = []
    for q in range(2):
        peak = max(int(tok[rows, q].sum()) for rows in cells(free, q))
        mean = int(tok[:, q].sum()) // (m * dp[q]) + 1
        max_tokens.append(max(int(tok[:, q].max()), (mean + 7 * peak) // 8))
        assert max_tokens[q] < peak  # the limit binds
    share = -(-n // m)
    max_samples = [0, -(-share // dp[1])]
    res = disttrain.reorder(c, dp, m, tokens=tok, max_tokens=max_tokens, max_samples=max_samples)
    check_map(res, c, dp, m)
    for q in range(2):
        for rows in cells(res, q):
            assert tok[rows, q].sum() <= max_tokens[q]
            if max_samples[q]:
                assert len(rows) <= max_samples[q]
    # The same through a reusable Reorderer, and the limits in its options.
    r = disttrain.Reorderer(dp, m, max_tokens=max_tokens, max_samples=max_samples)
    assert r.options["modules"][0]["max_tokens"] == max_tokens[0]
    assert "max_samples" not in r.options["modules"][0]
    again = r.assign(c, tokens=tok)
    assert np.array_equal(again["replica"], res["replica"])
    # A sample above its module's budget.
    big = tok.copy()
    big[17, 0] = max_tokens[0] + 1
    with pytest.raises(disttrain.Infeasible) as e:
        disttrain.reorder(c, dp, m, tokens=big, max_tokens=max_tokens)
    assert e.value.where == "batch[17].tokens[0]"
    # Bad token arrays.
    with pytest.raises(disttrain.InvalidArgument):
        disttrain.reorder(c, dp, m, tokens=tok[:, :1], max_tokens=max_tokens)
    with pytest.raises(disttrain.InvalidArgument):
        disttrain.reorder(c, dp, m, tokens=-tok.astype(np.int64), max_tokens=max_tokens)
    with pytest.raises(disttrain.InvalidArgument):
        disttrain.reorder(c, dp, m, tokens=tok, max_tokens=[1, 2, 3])


def test_exact_search_budget_is_an_option():
    # Slots of 20 samples: the exact finish applies (issue 41). With it the
    # iteration time is never above the same call without it.
    c = costs(n=320, k=3, seed=41)
    dp, m = [2, 4, 2], 16
    full = disttrain.reorder(c, dp, m)
    bare = disttrain.reorder(c, dp, m, exact_search_budget=0)
    check_map(full, c, dp, m)
    check_map(bare, c, dp, m)
    assert full["iteration_time"] <= bare["iteration_time"]
    r = disttrain.Reorderer(dp, m, exact_search_budget=1000)
    assert r.options["exact_search_budget"] == 1000


def test_reorder_options_are_the_cpp_fields():
    """The one Python list of reorder options (reorder's and Reorderer's
    signature) names every field of the C++ reorder_options, and no other."""
    import inspect
    py = {n for n, q in inspect.signature(disttrain.reorder).parameters.items()
          if q.kind is q.KEYWORD_ONLY} - {"ids", "tokens"}
    assert py == {n for n, q in inspect.signature(disttrain.Reorderer.__init__).parameters.items()
                  if q.kind is q.KEYWORD_ONLY}
    o = disttrain.Reorderer([2, 1], 4, max_samples=[3, 4], max_tokens=[0, 9]).options
    cpp = set(o) - {"modules", "microbatches"}
    per_module = set().union(*(set(m) for m in o["modules"])) - {"name", "dp"}
    # names and dp are the modules' name and dp; every other field is an option
    assert py == cpp | per_module | {"names"}, (sorted(py), sorted(cpp | per_module))
