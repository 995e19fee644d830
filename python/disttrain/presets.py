"""Built-in scenarios, models, data distributions and clusters (C++ ``model/presets.hpp``).

>>> import disttrain
>>> sc = disttrain.presets.scenario("paper-72b")     # a plain dict, editable
>>> sc["cluster"]["num_gpus"] = 512
"""
from __future__ import annotations

import json
from typing import Any

from . import _core

__all__ = ["scenario", "names", "model", "model_names", "data", "data_names", "cluster",
           "cluster_names"]


def scenario(name: str) -> dict[str, Any]:
    """The scenario preset ``name`` as a dict: name, description, model, cluster, data,
    global_batch_size (the JSON ``disttrain-plan --config`` reads)."""
    return json.loads(_core.scenario_preset(name))


def names() -> list[str]:
    """Names of the scenario presets (``disttrain-plan --list-presets``)."""
    return list(_core.scenario_preset_names())


def model(name: str) -> dict[str, Any]:
    """A model preset (``mllm-7b``, ``paper-72b``, ...) as a dict."""
    return json.loads(_core.model_preset(name))


def model_names() -> list[str]:
    return list(_core.model_preset_names())


def data(name: str) -> dict[str, Any]:
    """A data-distribution preset (``laion-400m``, ``interleaved``, ...) as a dict."""
    return json.loads(_core.data_preset(name))


def data_names() -> list[str]:
    return list(_core.data_preset_names())


def cluster(name: str, num_gpus: int) -> dict[str, Any]:
    """A cluster preset (``h100``, ``h800``, ``a100``) with ``num_gpus`` GPUs, as a dict."""
    return json.loads(_core.cluster_preset(name, num_gpus))


def cluster_names() -> list[str]:
    return list(_core.cluster_preset_names())
