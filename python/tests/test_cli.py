"""Agreement with the C++ command disttrain-plan on the presets."""
import json
import subprocess

import pytest

import disttrain

FIELDS = ("iteration_time_s", "mfu", "gpus", "bubble_fraction", "max_memory_bytes",
          "samples_per_s")


def cli(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("preset", disttrain.presets.names())
def test_plan_matches_the_cli(plan_tool, preset):
    c = cli(plan_tool, "--preset", preset, "--json")
    ours = disttrain.plan(disttrain.presets.scenario(preset))
    base = disttrain.plan_baseline(preset)
    assert ours["plan"] == c["plan"]
    assert base["plan"] == c["baseline"]["plan"]
    for f in FIELDS:
        assert ours[f] == c[f], f
        assert base[f] == c["baseline"][f], f
    assert ours["stats"] == c["stats"]
    assert (ours["num_gpus"], ours["global_batch"], ours["scenario"]) == (
        c["num_gpus"], c["global_batch"], c["scenario"])


def test_options_match_the_cli(plan_tool):
    c = cli(plan_tool, "--preset", "mllm-70b", "--json", "--max-virtual-stages", "1",
            "--max-side-pp", "1", "--sync-overlap", "grad")
    ours = disttrain.plan("mllm-70b", max_virtual_stages=1, max_side_pp=1,
                          overlap_grad_reduce=True, overlap_param_gather=False)
    assert ours["plan"] == c["plan"] and ours["iteration_time_s"] == c["iteration_time_s"]


def test_sequence_parallel_switch_matches_the_cli(plan_tool):
    c = cli(plan_tool, "--preset", "mllm-13b", "--json", "--gpus", "8", "--batch", "8",
            "--max-backbone-pp", "4", "--max-side-pp", "1", "--no-sequence-parallel")
    scenario = disttrain.presets.scenario("mllm-13b")
    scenario["cluster"]["num_gpus"] = 8
    scenario["global_batch_size"] = 8
    ours = disttrain.plan(scenario, max_backbone_pp=4, max_side_pp=1, sequence_parallel=False)
    assert all(m["sequence_parallel"] is False for m in ours["plan"]["modules"])
    assert ours["plan"] == c["plan"] and ours["iteration_time_s"] == c["iteration_time_s"]
    on = disttrain.plan(scenario, max_backbone_pp=4, max_side_pp=1)
    assert all(m["sequence_parallel"] is True for m in on["plan"]["modules"])
    assert on["iteration_time_s"] <= ours["iteration_time_s"]


def test_zero_bubble_switch_matches_the_cli(plan_tool):
    c = cli(plan_tool, "--preset", "mllm-7b", "--json", "--zero-bubble")
    ours = disttrain.plan("mllm-7b", zero_bubble=True)
    assert ours["plan"]["schedule"] == "zb_h1"
    assert ours["plan"] == c["plan"] and ours["iteration_time_s"] == c["iteration_time_s"]
    assert c["baseline"]["plan"]["schedule"] == "1f1b"
    assert ours["iteration_time_s"] < disttrain.plan("mllm-7b")["iteration_time_s"]


def test_selective_recompute_switch_matches_the_cli(plan_tool):
    # With fused attention (the default cost model) selective recompute saves no memory, so
    # the plan is the default one; the switch must reach both front ends alike.
    c = cli(plan_tool, "--preset", "mllm-7b", "--json", "--selective-recompute")
    ours = disttrain.plan("mllm-7b", search_selective_recompute=True)
    assert ours["plan"] == c["plan"] and ours["iteration_time_s"] == c["iteration_time_s"]
    assert ours["plan"] == disttrain.plan("mllm-7b")["plan"]


# mllm-13b (128 GPUs, 32 microbatches): the same bindings and the same trace
# writer as paper-72b, whose 1152-GPU trace took two minutes to write and compare.
def test_evaluate_and_simulate_match_the_cli(plan_tool, tmp_path):
    preset = "mllm-13b"
    r = disttrain.plan(preset)
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(r))
    c = cli(plan_tool, "--preset", preset, "--evaluate", str(f), "--json",
            "--trace", str(tmp_path / "cli.trace.json"))
    e = disttrain.evaluate(r, preset)
    assert e["plan"] == c["plan"] and e["evaluation"] == c["evaluation"]
    assert e["iteration_time_s"] == c["iteration_time_s"] == r["iteration_time_s"]
    s = disttrain.simulate(r, preset, trace=tmp_path / "py.trace.json",
                           svg=tmp_path / "py.svg")
    assert s["iteration_time_s"] == c["simulated_iteration_time_s"]
    assert json.loads((tmp_path / "py.trace.json").read_text()) == json.loads(
        (tmp_path / "cli.trace.json").read_text())
    assert "<svg" in (tmp_path / "py.svg").read_text()


def _small(preset="mllm-7b", gpus=16, batch=32):
    scenario = disttrain.presets.scenario(preset)
    scenario["cluster"]["num_gpus"] = gpus
    scenario["global_batch_size"] = batch
    return scenario


def test_data_objective_matches_the_cli(plan_tool):
    c = cli(plan_tool, "--preset", "mllm-7b", "--gpus", "16", "--batch", "32", "--json")
    ours = disttrain.plan(_small())
    assert ours["data_objective"] == c["data_objective"] == "sampled"
    assert ours["plan"] == c["plan"]
    assert ours["data_plan"]["predicted"] == c["data_plan"]["predicted"]
    expected = disttrain.plan(_small(), data_objective="expected")
    assert expected["data_objective"] == "expected" and "data_plan" not in expected
    few = disttrain.plan(_small(), data_batches=2, finalists=0)
    assert len(few["data_plan"]["predicted"]["seconds"]) == 2
    with pytest.raises(disttrain.ParseError):
        disttrain.plan(_small(), data_objective="mean")


def test_heterogeneity_matches_the_cli(plan_tool):
    c = cli(plan_tool, "--preset", "mllm-7b", "--gpus", "16", "--batch", "32", "--iterations",
            "2", "--json")["heterogeneity"]
    h = disttrain.heterogeneity(_small(), iterations=2)
    for case in ("baseline_arrival", "plan_arrival", "plan_reordered", "baseline_reordered"):
        assert h[case]["seconds"] == c[case]["seconds"], case
    for gain in ("orchestration_gain", "reordering_gain", "total_gain"):
        assert h[gain] == c[gain], gain
    assert h["plan_reordered"]["predicted_mean_s"] == c["plan_reordered"]["predicted_mean_s"]
    assert h["total_gain"] == pytest.approx(
        h["baseline_arrival"]["mean_s"] / h["plan_reordered"]["mean_s"])
