#!/usr/bin/env bash
# disttrain quick start for a fresh Debian 12 machine (or any Debian/Ubuntu
# with CMake >= 3.25).
#
#   scripts/quickstart.sh        build (release preset) and run the main job:
#                                the disttrain-plan planner on the paper's
#                                72B preset (until the planner exists: every
#                                example program)
#   scripts/quickstart.sh test   build (dev preset: -Og, assertions on, warnings
#                                as errors, MPI on, no benchmarks) and run every test but the ones
#                                labelled exhaustive (.ci/run runs those),
#                                print the slowest tests, then the Python
#                                package's tests: a venv in build/python-venv
#                                with PyTorch's CPU wheel (downloaded while
#                                the C++ build runs), pip install ., pytest
#                                (SKIPPED when PyPI cannot be reached; the
#                                torch tests alone SKIP without PyTorch)
#   scripts/quickstart.sh test-python   the Python tests alone
#
# Missing Debian packages are installed with apt-get when running as root or
# with sudo; otherwise the exact command to run is printed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-run}"
DEB_PACKAGES=(cmake ninja-build g++ pkg-config libeigen3-dev libfmt-dev catch2
              nlohmann-json3-dev libopenmpi-dev openmpi-bin libturbojpeg0-dev)
JOBS="$(nproc 2>/dev/null || echo 2)"

say() { printf '\033[1m[quickstart]\033[0m %s\n' "$*"; }
die() {
  printf '\033[1;31m[quickstart]\033[0m %s\n' "$*" >&2
  [ -z "${PY_DEPS_PID:-}" ] || kill "$PY_DEPS_PID" 2>/dev/null || true
  exit 1
}

ensure_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    say "not a Debian/Ubuntu system: make sure these (or your distribution's equivalents) are installed:"
    say "  ${DEB_PACKAGES[*]}"
    return 0
  fi
  local missing=() p
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  local cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
      sudo=(sudo)
    else
      die "missing packages: ${missing[*]}. Install them with:
  sudo sh -c '$cmd'
then run this script again."
    fi
  fi
  say "installing missing packages: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

check_cmake() {
  local v
  v="$(cmake --version | head -n1 | sed 's/[^0-9.]*\([0-9.]*\).*/\1/')"
  if [ "$(printf '%s\n3.25\n' "$v" | sort -V | head -n1)" != "3.25" ]; then
    die "CMake $v is too old: disttrain needs CMake >= 3.25 (Debian 12 ships 3.25.1)"
  fi
}

# mpirun refuses to run as root unless told it is fine (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

run_main_job() {
  cmake --preset release
  if [ -f tools/disttrain-plan.cpp ]; then
    cmake --build --preset release --target disttrain-plan
    say "running: disttrain-plan --preset paper-72b"
    build/release/tools/disttrain-plan --preset paper-72b
    return
  fi
  local targets=() src
  for src in examples/*.cpp; do
    [ -e "$src" ] && targets+=("example_$(basename "$src" .cpp)")
  done
  if [ "${#targets[@]}" -eq 0 ]; then
    cmake --build --preset release
    say "built disttrain; there is no planner tool or example to run yet"
    return
  fi
  cmake --build --preset release --target "${targets[@]}"
  local t
  for t in "${targets[@]}"; do
    say "running: $t"
    "build/release/examples/$t"
  done
}

run_tests() {
  export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$JOBS}"
  python_deps_start
  local status=0
  cmake --workflow --preset dev || status=$?
  slowest_tests "$ROOT/build/dev/ctest-junit.xml"
  [ "$status" -eq 0 ] || die "C++ tests failed (build/dev; exit status $status)"
  say "all C++ tests passed (build/dev)"
  run_python_tests
}

# slowest_tests <ctest JUnit file> [n]: the n (10) slowest tests, with their timeouts.
slowest_tests() {
  local junit="$1" n="${2:-10}"
  [ -f "$junit" ] || return 0
  say "slowest tests (seconds; from ${junit#"$ROOT"/}):"
  # awk stops printing after n lines but reads everything: no `head` closing the
  # pipe early, whose SIGPIPE to sort would fail the pipeline (set -o pipefail).
  sed -n 's/.*<testcase name="\([^"]*\)".* time="\([0-9.]*\)".*/\2 \1/p' "$junit" |
    sort -rn | awk -v n="$n" 'NR <= n { printf "  %8.1f  %s\n", $1, $2 }'
}

# python3 with venv/ensurepip and the headers an extension builds against.
python_ready() {
  command -v python3 >/dev/null 2>&1 &&
    python3 -c 'import ensurepip, venv, os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
      2>/dev/null
}

# The Python package (docs/python.md): pip install . into a venv, then pytest
# against the dev build's disttrain-plan. A machine that cannot reach PyPI (or
# apt, for python3-venv / python3-dev) prints SKIPPED with the reason.
# Three phases, so `test` can download the Python dependencies (PyTorch's
# wheel is the largest download of the whole command) while the C++ build
# runs: python_prepare (apt, foreground), python_deps (venv + pip; `test`
# runs it in the background, logging to build/python-deps.log) and
# python_build_and_test.
PY_VENV="$ROOT/build/python-venv"
PY_SKIP=""  # why the Python tests are skipped, once known

python_prepare() {
  python_ready && return 0
  local pkgs=(python3 python3-venv python3-dev) sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo); else
      PY_SKIP="python3 with venv and headers is missing; install ${pkgs[*]} as root"
      return 0
    fi
  fi
  say "installing ${pkgs[*]} for the Python tests"
  if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update &&
         "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
           "${pkgs[@]}"; } || ! python_ready; then
    PY_SKIP="could not install ${pkgs[*]} (no network?)"
  fi
}

# Exit status 3: the build requirements could not be installed (PyPI unreachable).
python_deps() {
  [ -x "$PY_VENV/bin/python" ] || python3 -m venv "$PY_VENV"
  # Build requirements installed up front (so the build below needs no network
  # and is incremental in build/python/): a failure here is the network's.
  "$PY_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      "scikit-build-core>=0.10" "nanobind>=2.0" "numpy>=1.21" "pytest>=7" || return 3
  # PyTorch for the disttrain.torch tests (examples/python/torch_mllm.py under
  # torchrun, gloo on CPU): the CPU wheel from download.pytorch.org, else PyPI's
  # (larger: CUDA libraries). Without either, those tests SKIP with the reason.
  if ! "$PY_VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
    echo "installing PyTorch (CPU wheel) for the disttrain.torch tests"
    # pip's own error for an unreachable index is noise here: the fallback says what happened.
    "$PY_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --retries 1 \
        --timeout 30 torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null || {
      echo "download.pytorch.org unavailable: installing PyTorch from PyPI instead"
      "$PY_VENV/bin/python" -m pip install --quiet --disable-pip-version-check torch ||
        echo "PyTorch could not be installed: the disttrain.torch tests will be SKIPPED"
    }
  fi
  return 0
}

python_build_and_test() {
  # The extension is built at -Og, as the C++ tests are (`pip install .` alone
  # builds -O3): the tests check behaviour, and -Og compiles it in half the
  # time (docs/packaging.md, "Presets"). Its own build tree, so that a later
  # plain `pip install .` (build/python) does not inherit the flags.
  say "pip install . (the disttrain Python package at -Og, build/python-test)"
  CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$PY_VENV/bin/python" -m pip install --quiet \
    --disable-pip-version-check --no-build-isolation --no-deps \
    --config-settings=build-dir="build/python-test/{wheel_tag}" \
    --config-settings=cmake.define.CMAKE_CXX_FLAGS_RELEASE="-Og -DNDEBUG" "$ROOT"
  say "pytest python/tests (-m 'not slow': .ci/run runs the slow ones)"
  # The CLI-agreement tests use the dev build's disttrain-plan (`test` builds
  # it); without one (test-python alone) conftest.py looks in the other build
  # trees and on PATH, and skips those tests if there is none.
  local plan_tool=()
  [ -x "$ROOT/build/dev/tools/disttrain-plan" ] &&
    plan_tool=(DISTTRAIN_PLAN="$ROOT/build/dev/tools/disttrain-plan")
  (cd "$ROOT" && env "${plan_tool[@]}" \
     "$PY_VENV/bin/python" -m pytest -q -rs --durations=5 -p no:cacheprovider -m "not slow" \
       python/tests)
  say "all Python tests passed (build/python-venv)"
}

# python_deps_start: python_prepare, then python_deps in the background.
# python_deps_finish: waits for it and sets PY_SKIP when it failed.
PY_DEPS_PID=""
PY_DEPS_LOG="$ROOT/build/python-deps.log"
python_deps_start() {
  python_prepare
  [ -z "$PY_SKIP" ] || return 0
  mkdir -p "$ROOT/build"
  say "installing the Python test dependencies in the background (log: ${PY_DEPS_LOG#"$ROOT"/})"
  python_deps >"$PY_DEPS_LOG" 2>&1 &
  PY_DEPS_PID=$!
}
python_deps_finish() {
  [ -n "$PY_DEPS_PID" ] || return 0
  local rc=0
  wait "$PY_DEPS_PID" || rc=$?
  PY_DEPS_PID=""
  cat "$PY_DEPS_LOG"
  python_deps_status "$rc"
}
# python_deps_status <python_deps' exit status>: sets PY_SKIP or dies.
python_deps_status() {
  case "$1" in
    0) ;;
    3) PY_SKIP="scikit-build-core, nanobind, numpy and pytest could not be installed from PyPI (no network?)" ;;
    *) die "installing the Python test dependencies failed (exit status $1)" ;;
  esac
}

run_python_tests() {
  if [ -n "$PY_DEPS_PID" ]; then
    python_deps_finish
  else
    python_prepare
    if [ -z "$PY_SKIP" ]; then
      local rc=0
      python_deps || rc=$?
      python_deps_status "$rc"
    fi
  fi
  if [ -n "$PY_SKIP" ]; then
    say "SKIPPED: Python tests: $PY_SKIP"
    return 0
  fi
  python_build_and_test
}

case "$MODE" in
  run)  ensure_packages; check_cmake; run_main_job ;;
  test) ensure_packages; check_cmake; run_tests; say "test command done in ${SECONDS} s" ;;
  test-python) ensure_packages; check_cmake; run_python_tests ;;
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown mode '$MODE' (use: run, test, test-python)" ;;
esac
