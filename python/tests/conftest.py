"""Shared fixtures of the disttrain Python tests (run: pytest python/tests)."""
from __future__ import annotations

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def plan_tool() -> str:
    """The C++ disttrain-plan command: $DISTTRAIN_PLAN, else a build tree's, else PATH's."""
    env = os.environ.get("DISTTRAIN_PLAN")
    if env:
        if not os.access(env, os.X_OK):
            pytest.fail(f"DISTTRAIN_PLAN={env} is not an executable")
        return env
    for preset in ("dev", "release", "asan"):
        p = ROOT / "build" / preset / "tools" / "disttrain-plan"
        if os.access(p, os.X_OK):
            return str(p)
    found = shutil.which("disttrain-plan")
    if found:
        return found
    pytest.skip("no disttrain-plan binary (build the tools, or set DISTTRAIN_PLAN)")
