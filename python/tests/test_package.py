"""The package itself: version, stubs, presets."""
import importlib.metadata
import pathlib
import re

import disttrain
from disttrain import _core


def test_version_is_the_cpp_version(repo_root):
    hpp = (repo_root / "include/disttrain/core/version.hpp").read_text()
    cpp = re.search(r'#define DISTTRAIN_VERSION_STRING "([^"]+)"', hpp).group(1)
    cmake = re.search(r"project\(disttrain VERSION ([0-9.]+)",
                      (repo_root / "CMakeLists.txt").read_text()).group(1)
    assert disttrain.__version__ == cpp == cmake
    assert importlib.metadata.version("disttrain") == cpp


def test_stubs_and_marker_installed():
    pkg = pathlib.Path(disttrain.__file__).parent
    stub = (pkg / "_core.pyi").read_text()
    assert "class Reorderer" in stub and "def plan(" in stub
    assert "def topology(" in stub and "def bind_rank(" in stub
    assert (pkg / "py.typed").exists()


def test_no_torch_import():
    import sys
    assert "torch" not in sys.modules


def test_presets_round_trip():
    names = disttrain.presets.names()
    assert "paper-72b" in names
    sc = disttrain.presets.scenario("paper-72b")
    assert set(sc) == {"name", "description", "model", "cluster", "data", "global_batch_size"}
    assert sc["name"] == "paper-72b"
    for n in disttrain.presets.model_names():
        assert disttrain.presets.model(n)["modules"]
    for n in disttrain.presets.data_names():
        assert isinstance(disttrain.presets.data(n), dict)
    assert disttrain.presets.cluster("h800", 64)["num_gpus"] == 64
    assert _core.max_reorder_modules == 8


def test_scenario_shortcuts_and_files(tmp_path):
    base = disttrain.plan("mllm-7b")
    sc = disttrain.presets.scenario("mllm-7b")
    config = {"model": "mllm-7b", "data": sc["data"], "global_batch_size": sc["global_batch_size"],
              "cluster": sc["cluster"], "planner": {"max_side_pp": 2}}
    f = tmp_path / "config.json"
    import json
    f.write_text(json.dumps(config))
    from_file = disttrain.plan(f)
    assert from_file["plan"] == base["plan"]
    assert disttrain.plan(sc)["plan"] == base["plan"]
