"""disttrain.torch: the BatchSampler (no torch needed) and the Runner, through
examples/python/torch_mllm.py trained disaggregated under torchrun (gloo, CPU,
float64) at three layouts with different DP per module (one interleaved), each checked against a
single-process run on the same batch (max relative gradient error <= 1e-12)."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import disttrain
from disttrain.torch import BatchSampler, module_of

TOPO = [{"name": "enc", "role": "encoder", "dp": 2},
        {"name": "llm", "role": "backbone", "pp": 2, "dp": 1},
        {"name": "gen", "role": "generator", "dp": 3}]


def costs(ids):
    g = np.random.default_rng(7)
    table = g.lognormal(size=(1000, 3))
    return table[ids.astype(np.int64)]


def test_import_does_not_import_torch():
    code = "import sys, disttrain.torch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def test_batch_sampler_gives_each_replica_its_cells():
    t = disttrain.topology(TOPO)
    # a shuffled sampler, the same on every rank
    order = list(np.random.default_rng(1).permutation(100))
    per_rank = {r: BatchSampler(order, 24, t, r, costs, 4) for r in range(t["world_size"])}
    lists = {r: list(s) for r, s in per_rank.items()}
    assert all(len(v) == len(per_rank[0]) == 4 * 4 for v in lists.values())  # 4 full batches
    for b in range(4):
        batch = sorted(order[24 * b:24 * (b + 1)])
        cmap = per_rank[0].reorder(order[24 * b:24 * (b + 1)])
        for k, m in enumerate(t["owning_modules"]):
            ranks = [r for r in range(t["world_size"]) if t["ranks"][r]["module"] == m]
            for j in range(4):
                got = []
                for r in ranks:
                    mine = lists[r][4 * b + j]
                    assert mine == list(disttrain.cell(cmap, *module_of(t, r), j))
                    if t["ranks"][r]["stage"] == 0:
                        got += mine
                want = cmap["id"][cmap["microbatch"] == j]
                assert sorted(got) == sorted(int(i) for i in want)
        # every sample of the batch in exactly one microbatch
        assert sorted(int(i) for i in cmap["id"]) == batch


def test_batch_sampler_errors():
    t = disttrain.topology(TOPO)
    with pytest.raises(disttrain.InvalidArgument) as e:
        BatchSampler(range(10), 5, t, 7, costs, 2)
    assert e.value.where == "BatchSampler.rank"
    s = BatchSampler([1, 1, 2, 3], 4, t, 0, costs, 2)
    with pytest.raises(disttrain.InvalidArgument):  # ids must be unique within a batch
        list(s)


EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "torch_mllm.py")


def _torchrun(example, nproc, flags):
    """stdout of `example` under torchrun on `nproc` ranks; fails with its output."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           str(nproc), example, *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return out.stdout


def _check_run(example, layout):
    """A --check run at `layout` on 7 ranks: gradients equal serial, the world valid on NCCL."""
    out = _torchrun(example, 7, [*layout, "--iterations", "1", "--check"])
    err = float(re.search(r"max relative gradient error: (\S+)", out).group(1))
    assert err <= 1e-12, out
    assert "check (limit 1e-12): OK" in out
    assert "NCCL's rendezvous semantics: no deadlock" in out
    if "--zero-bubble" in layout:  # B and W ran apart
        assert int(re.search(r"messages on rank 0, (\d+) W ops", out).group(1)) > 0, out


@pytest.mark.parametrize("layout", [
    # (the interleaved layout below runs the same modules in 2 chunks: this
    # one is `slow`, run by .ci/run, not by the README's test command)
    pytest.param(["--enc-dp", "2", "--bb-pp", "2", "--bb-dp", "1", "--gen-dp", "3"],
                 marks=pytest.mark.slow),
    ["--enc-dp", "1", "--bb-pp", "1", "--bb-dp", "3", "--gen-dp", "3"],
    # interleaved 1F1B: 2 model chunks per backbone rank
    # with NCCL's matching (tags ignored, a pair's messages in issue order,
    # sends done once received): interleaved deadlocks unless bound in
    # rendezvous order
    ["--enc-dp", "2", "--bb-pp", "2", "--bb-dp", "1", "--gen-dp", "3", "--virtual-stages", "2",
     "--microbatches", "4", "--fifo"],
    # ZB-H1: B and W apart; TP2 on the receiving backbone, different DP per module
    ["--enc-dp", "2", "--bb-tp", "2", "--bb-pp", "2", "--bb-dp", "1", "--gen-dp", "1",
     "--zero-bubble", "--fifo"],
    # three named fields per link (hidden, int64 text, int32 lengths): the
    # backbone and generator split and embed what they receive
    ["--enc-dp", "2", "--bb-tp", "2", "--bb-pp", "2", "--bb-dp", "1", "--gen-dp", "1",
     "--fields", "--fifo"],
], ids=["enc2-pp2-gen3", "enc1-dp3-gen3", "interleaved-pp2-v2-fifo", "zb-h1-tp2-fifo",
        "fields-tp2-fifo"])
def test_torch_mllm_under_torchrun(layout):
    # find_spec, not import: this process stays torch-free (test_package checks it).
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (scripts/quickstart.sh installs it); "
                    "the torchrun runs of examples/python/torch_mllm.py need it")
    _check_run(EXAMPLE, layout)


def _losses(example, flags):
    return [float(x) for x in re.findall(r"iter \d+  loss (\S+)", _torchrun(example, 4, [
        "--enc-dp", "1", "--bb-pp", "2", "--bb-dp", "1", "--gen-dp", "1", "--iterations", "20",
        *flags]))]


def test_torch_mllm_bf16_trains_and_tracks_float32():
    # bfloat16 weights, activations and messages: 20 iterations (a new batch
    # each) against the same run in float32; the loss falls in both (the
    # last five iterations' mean below the first five's) and bf16 stays
    # within 2% of float32 at every iteration.
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (scripts/quickstart.sh installs it)")
    # (bf16 with --fields: bfloat16 hidden states beside int64 and int32
    # fields in each message; the same math.)
    f32, bf16 = _losses(EXAMPLE, ["--float32"]), _losses(EXAMPLE, ["--bf16", "--fields"])
    assert len(f32) == len(bf16) == 20
    for losses in (f32, bf16):
        assert sum(losses[-5:]) < sum(losses[:5]), losses
    worst = max(abs(b - a) / abs(a) for a, b in zip(f32, bf16))
    assert worst <= 2e-2, (worst, f32, bf16)


HF_EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                          "hf_mllm.py")


def _needs_transformers():
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed: examples/python/hf_mllm.py needs PyTorch and "
                        f"transformers (.ci/run installs both; the README's test command does "
                        f"not install transformers, to stay under 10 minutes)")


@pytest.mark.parametrize("layout", [
    # TP2 on the receiving backbone and the encoder, DP 1 / 1 / 3, three fields
    # per link (hidden, int64 text, int32 lengths)
    ["--enc-tp", "2", "--enc-dp", "1", "--bb-tp", "2", "--bb-pp", "1", "--bb-dp", "1",
     "--gen-dp", "3", "--fields"],
    # ZB-H1 (B and W apart), TP2 PP2 backbone, NCCL's matching on gloo
    ["--enc-dp", "2", "--bb-tp", "2", "--bb-pp", "2", "--bb-dp", "1", "--gen-dp", "1",
     "--zero-bubble", "--fifo"],
], ids=["tp2-receiver-dp-1-1-3-fields", "zb-h1-tp2-pp2-fifo"])
def test_hf_mllm_under_torchrun(layout):
    # transformers' ViT and Llama layers, disaggregated: gradients equal serial
    _needs_transformers()
    _check_run(HF_EXAMPLE, layout)


def test_hf_mllm_bf16_loss_falls_and_tracks_float32():
    # 20 iterations on one batch (lr 1e-2) in float32 and in bfloat16: the loss
    # falls at every step in both (1% slack) to below 40% of its start, and
    # bfloat16 stays within 2% of the initial loss of float32 at every step.
    _needs_transformers()
    flags = ["--same-batch", "--lr", "1e-2"]
    f32 = _losses(HF_EXAMPLE, ["--float32", *flags])
    bf16 = _losses(HF_EXAMPLE, ["--bf16", *flags])
    assert len(f32) == len(bf16) == 20
    for losses in (f32, bf16):
        assert all(b <= 1.01 * a for a, b in zip(losses, losses[1:])), losses
        assert losses[-1] < 0.4 * losses[0], losses
    assert max(abs(b - a) for a, b in zip(f32, bf16)) <= 0.02 * f32[0], (f32, bf16)


def test_batch_sampler_takes_reorder_options():
    t = disttrain.topology(TOPO)
    ids = list(range(24))
    default = BatchSampler(ids, 24, t, 0, costs, 4).reorder(ids)
    lpt = BatchSampler(ids, 24, t, 0, costs, 4, reorder={"balance": "lpt"})
    assert lpt.reorderer.options["balance"] == "lpt"
    capped = BatchSampler(ids, 24, t, 0, costs, 4, reorder={"max_samples": [4, 6, 3]})
    m = capped.reorder(ids)
    for k, dp in enumerate(m["dp"]):
        for r in range(dp):
            for j in range(4):
                assert len(disttrain.cell(m, k, r, j)) <= [4, 6, 3][k]
    assert sorted(default["id"].tolist()) == sorted(m["id"].tolist())
    with pytest.raises(disttrain.InvalidArgument) as e:
        BatchSampler(ids, 24, t, 0, costs, 4, reorder={"stages": []})
    assert e.value.where == "reorderer_of.stages"
    with pytest.raises(TypeError):  # a misspelt option names the Python parameter
        BatchSampler(ids, 24, t, 0, costs, 4, reorder={"balanse": "lpt"})


FEATURES = os.path.join(os.path.dirname(__file__), "torch_features.py")


def _features(mode, nproc):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (scripts/quickstart.sh installs it)")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    launch = [] if nproc is None else ["-m", "torch.distributed.run", "--standalone",
                                       "--nproc-per-node", str(nproc)]
    out = subprocess.run([sys.executable, *launch, FEATURES, mode], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return out.stdout


def test_runner_tied_embedding_and_two_losses_equal_serial():
    # Backbone PP2 DP2: the embedding on stage 0 tied to the LM head on stage 1,
    # stage 0 returning (per-sample outputs, its own loss), stage 1 the LM loss.
    out = _features("tied", 4)
    err = float(re.search(r"max relative gradient error: (\S+)", out).group(1))
    assert err <= 1e-12, out
    a, b = re.search(r"losses: (\S+) vs serial (\S+)", out).groups()
    assert float(a) == pytest.approx(float(b), rel=1e-12)


def test_runner_accumulates_gradients_over_two_runs():
    # The same batch as the tied test, in two halves: run(sync=False), run(zero_grad=False).
    out = _features("accumulate", 4)
    err = float(re.search(r"max relative gradient error: (\S+)", out).group(1))
    assert err <= 1e-12, out


def test_runner_names_the_sample_whose_rows_are_wrong():
    out = _features("wrong-rows", 2)
    assert "error at Runner.forward:" in out, out
    sample = int(re.search(r"sample (\d+) has \d+ elements, shapes\(\) gives it", out).group(1))
    first = re.search(r"microbatch 0 samples: \[([^\]]*)\]", out).group(1)
    assert sample in [int(s) for s in first.split(",")]


def test_runner_fails_on_a_plan_disagreement_with_bytes_of_the_right_size():
    # The stamp travels at the head of each message: a receiver bound from
    # another batch names the sender instead of training on its bytes.
    out = _features("disagreement", 2)
    assert re.search(r"rank 1: CommError: disttrain: comm_error at rank 1 op #\d+: plan disagreement "
                     r"between rank 0 and rank 1: rank 0 sent stamp 0x[0-9a-f]{16} where this "
                     r"rank's program has", out), out
    assert "rank 0: Timeout: disttrain: timeout at rank 0 -> ranks [1]" in out, out


def test_runner_fields_errors_name_the_field():
    out = _features("field-errors", 2)
    assert ("error at shapes[0].fields[1].differentiable: disttrain: invalid_argument at "
            "shapes[0].fields[1].differentiable: field 'ids' has dtype torch.int64") in out, out
    assert ("returned ['hidden']; its output link has fields ['hidden', 'ids']") in out, out


def test_fifo_transport_fails_a_reordered_program_naming_the_pair():
    # Receives of microbatches 0 and 1 swapped on rank 1: with NCCL's matching
    # (FifoP2P on gloo) rank 1 gets microbatch 0's message first and fails
    # naming the pair; rank 0's send is never received (its timeout names it).
    out = _features("reordered", 2)
    assert re.search(r"rank 1: CommError: disttrain: comm_error at rank \S+ .*rank 0.*rank 1", out) \
        or re.search(r"rank 1: CommError: .*between rank 0 and rank 1", out), out
    assert "rank 0: Timeout: disttrain: timeout at rank 0 -> rank 1" in out, out


def test_batch_sampler_maps_travel_with_dataloader_workers():
    out = _features("dataloader", None)
    assert "every microbatch matched its map" in out, out
