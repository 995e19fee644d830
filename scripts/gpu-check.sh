#!/usr/bin/env bash
# One-shot GPU check: on a machine with an NVIDIA GPU, configure the `cuda`
# preset, build only what needs a device (CMake target disttrain_gpu_check:
# the GPU tests and benchmarks), run every test labelled `gpu` (gpu.*,
# mpi.nccl.*) and the GPU benchmarks (copy_blocks kernel vs cudaMemcpy D2D;
# NCCL backend vs raw ncclSend/ncclRecv on one GPU, one rank exchanging with
# itself, and on 2 ranks, which needs 2 GPUs: skipped with the reason
# otherwise), then write one JSON summary.
#
#   scripts/gpu-check.sh [--jobs N] [--budget SECONDS] [--deps DIR]
#
# --deps DIR: a prefix holding nlohmann/json, Eigen, fmt and Catch2 for a GPU
# machine that cannot install packages (scripts/gpu-deps.sh makes one; default
# build/gpu-deps when it exists). NCCL is looked for in the CUDA toolkit, the
# system, NCCL_ROOT and Python's nvidia-nccl wheel. With fewer than 2 GPUs the
# MPI-bootstrapped NCCL tests are not built (NCCL needs a GPU per rank);
# gpu.nccl_one_rank runs the NCCL backend on one GPU instead. Warnings are not
# errors here (CI gates them on the CPU build); the summary counts them.
#
# Summary: $OUT/gpu-check.json when OUT is set, else build/gpu-check.json;
# logs of every step next to it (gpu-check-logs/). The summary is written
# after every step and on any exit, so a run cut short still leaves one.
# Without a GPU it says so, writes {"status": "skipped", ...} and exits 0.
# Every step has a time limit; the whole run stays within --budget (default
# 450 s, i.e. under 8 minutes with slack) on a 16-core machine.
# Exit status: 0 when nothing failed (passed or skipped), 1 otherwise.
#
# Environment: CUDA at /usr/local/cuda (or nvcc on PATH, or CUDACXX);
# DISTTRAIN_GPU_CHECK_NO_GPU=1 behaves as if no GPU existed (the test
# scripts.gpu_check_skips uses it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
START=$SECONDS
JOBS="$(nproc 2>/dev/null || echo 2)"
BUDGET=450
DEPS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) JOBS="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    --deps) DEPS="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
if [ -n "${OUT:-}" ]; then
  SUMMARY_DIR="$OUT"
else
  SUMMARY_DIR="$ROOT/build"
fi
mkdir -p "$SUMMARY_DIR/gpu-check-logs"
SUMMARY="$SUMMARY_DIR/gpu-check.json"
LOGS="$SUMMARY_DIR/gpu-check-logs"
BUILD="$ROOT/build/cuda"

# The commit, and "+ changes" when tracked files differ from it (a copied
# working tree whose .git is older than its files says so instead of naming
# a commit it does not hold).
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ "$COMMIT" != unknown ] && ! git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null; then
  COMMIT="$COMMIT + changes"
fi

say() { printf '\033[1m[gpu-check t=%ss]\033[0m %s\n' "$((SECONDS - START))" "$*"; }

# ---- the summary -------------------------------------------------------------
STATUS="running"  # -> passed | failed | skipped
REASON=""
MACHINE='{}'
STEPS=()          # JSON objects, one per step
TESTS='[]'
BENCH_COPY='null'
BENCH_NCCL='null'
BENCH_NCCL_ONE='null'
BUILD_WARNINGS='null'

json_str() {  # a JSON string literal
  local s="$1"
  s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; s="${s//$'\n'/\\n}"; s="${s//$'\r'/}"; s="${s//$'\t'/ }"
  s="$(printf '%s' "$s" | tr -d '\000-\037')"
  printf '"%s"' "$s"
}

# A file's JSON if it is one valid JSON value, else null.
json_file_or_null() {
  local f="$1"
  if [ -s "$f" ] && command -v python3 >/dev/null 2>&1 &&
     python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null; then
    cat "$f"
  elif [ -s "$f" ] && ! command -v python3 >/dev/null 2>&1 &&
       [ "$(head -c1 "$f")" = "{" ] && [ "$(tail -c2 "$f" | head -c1)" = "}" ]; then
    cat "$f"
  else
    printf 'null'
  fi
}

# bench_result <exit status> <stdout file>: the benchmark's JSON, or why not.
bench_result() {
  local rc="$1" f="$2"
  if [ "$rc" -eq 77 ]; then
    printf '{"skipped": %s}' "$(json_str "$(head -c 400 "$f" 2>/dev/null)")"
  elif [ "$rc" -ne 0 ]; then
    printf '{"failed": %s}' "$(json_str "exit $rc: $(tail -c 400 "$f" 2>/dev/null)")"
  else
    json_file_or_null "$f"
  fi
}

write_summary() {
  local steps="" s
  for s in "${STEPS[@]+"${STEPS[@]}"}"; do steps+="${steps:+,}$s"; done
  {
    printf '{\n  "status": %s,\n  "reason": %s,\n' "$(json_str "$STATUS")" "$(json_str "$REASON")"
    printf '  "seconds": %s,\n  "budget_seconds": %s,\n' "$((SECONDS - START))" "$BUDGET"
    printf '  "commit": %s,\n' "$(json_str "$COMMIT")"
    printf '  "machine": %s,\n' "$MACHINE"
    printf '  "steps": [%s],\n' "$steps"
    printf '  "build_warnings": %s,\n' "$BUILD_WARNINGS"
    printf '  "tests": %s,\n' "$TESTS"
    printf '  "benchmarks": {"copy_blocks_vs_memcpy": %s, "nccl_backend_vs_raw_nccl": %s, "nccl_backend_vs_raw_nccl_one_rank": %s},\n' \
      "$BENCH_COPY" "$BENCH_NCCL" "$BENCH_NCCL_ONE"
    printf '  "logs": %s\n}\n' "$(json_str "$LOGS")"
  } >"$SUMMARY.tmp"
  mv "$SUMMARY.tmp" "$SUMMARY"
}

finish() {
  local rc=$?
  if [ "$STATUS" = "running" ]; then
    STATUS="failed"
    REASON="${REASON:-the script stopped early (exit status $rc)}"
  fi
  write_summary || true
  say "status: $STATUS${REASON:+ ($REASON)}; summary: $SUMMARY"
  if [ "$STATUS" = "failed" ]; then exit 1; fi
  exit 0
}
trap finish EXIT
trap 'REASON="interrupted"; exit 1' INT TERM

# run_step <name> <limit s> <command...>: runs with a time limit (bounded by
# what is left of the budget), logs to $LOGS/<name>.log, records the step.
# Returns the command's status (124: time limit).
run_step() {
  local name="$1" limit="$2"; shift 2
  local left=$((BUDGET - (SECONDS - START) - 15))
  if [ "$limit" -gt "$left" ]; then limit=$left; fi
  if [ "$limit" -lt 5 ]; then
    STEPS+=("{\"name\": $(json_str "$name"), \"status\": \"skipped\", \"reason\": \"no time left in the budget\"}")
    write_summary
    return 124
  fi
  say "$name (limit ${limit} s): $*"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1 || rc=$?
  local st=passed
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then st=timeout; elif [ "$rc" -eq 77 ]; then st=skipped
  elif [ "$rc" -ne 0 ]; then st=failed; fi
  STEPS+=("{\"name\": $(json_str "$name"), \"status\": \"$st\", \"exit\": $rc, \"seconds\": $((SECONDS - t0)), \"limit\": $limit, \"log_tail\": $(json_str "$(tail -n 15 "$LOGS/$name.log")")}")
  write_summary
  say "$name: $st (exit $rc, $((SECONDS - t0)) s)"
  if [ "$st" = failed ] || [ "$st" = timeout ]; then FAILED_STEPS+=("$name"); fi
  return "$rc"
}
FAILED_STEPS=()

skip_all() {
  STATUS="skipped"
  REASON="$1"
  say "SKIPPED: $1"
  exit 0
}

# ---- 1. is there a GPU? ------------------------------------------------------
if [ "${DISTTRAIN_GPU_CHECK_NO_GPU:-0}" = 1 ]; then
  skip_all "no GPU (DISTTRAIN_GPU_CHECK_NO_GPU=1)"
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    skip_all "no GPU on this machine (no nvidia-smi, no /dev/nvidia*)"
  fi
  GPU_LIST="(nvidia-smi missing; /dev/nvidia* present)"
  devs=(/dev/nvidia[0-9]*)
  N_GPUS="${#devs[@]}"
else
  GPU_LIST="$(timeout 30 nvidia-smi -L 2>&1 || true)"
  N_GPUS="$(printf '%s\n' "$GPU_LIST" | grep -c '^GPU [0-9]' || true)"
  if [ "$N_GPUS" -eq 0 ]; then
    skip_all "no GPU: nvidia-smi -L lists none ($(printf '%s' "$GPU_LIST" | head -n1))"
  fi
fi
say "$N_GPUS GPU(s): $(printf '%s' "$GPU_LIST" | head -n 4 | tr '\n' ';')"

# ---- 2. toolchain -------------------------------------------------------------
NVCC="${CUDACXX:-}"
if [ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc; fi
if [ -z "$NVCC" ]; then NVCC="$(command -v nvcc || true)"; fi
CC_CAP="$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' || true)"
DRIVER="$(timeout 30 nvidia-smi --query-gpu=driver_version,name,memory.total --format=csv,noheader 2>/dev/null | head -n1 || true)"
NVCC_VERSION="missing"
if [ -n "$NVCC" ]; then NVCC_VERSION="$NVCC: $("$NVCC" --version 2>/dev/null | tail -n1 || true)"; fi
MACHINE="{\"gpus\": $N_GPUS, \"gpu_list\": $(json_str "$GPU_LIST"), \"driver_name_memory\": $(json_str "$DRIVER"), \"compute_capability\": $(json_str "$CC_CAP"), \"nvcc\": $(json_str "$NVCC_VERSION"), \"cores\": $JOBS}"
write_summary
# Third-party headers: the system's, or a carried prefix (scripts/gpu-deps.sh).
if [ -z "$DEPS" ] && [ -d "$ROOT/build/gpu-deps" ]; then DEPS="$ROOT/build/gpu-deps"; fi
if [ -n "$DEPS" ]; then
  if [ ! -d "$DEPS/include" ]; then
    STATUS="failed"; REASON="--deps $DEPS has no include/ (make it with scripts/gpu-deps.sh)"; exit 1
  fi
  DEPS="$(cd "$DEPS" && pwd)"
  export CMAKE_PREFIX_PATH="$DEPS${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  for d in "$DEPS"/lib "$DEPS"/lib/*-linux-gnu; do
    if [ -d "$d" ]; then export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
  done
fi
missing=()
[ -n "$NVCC" ] || missing+=("nvcc (CUDA toolkit at /usr/local/cuda, or set CUDACXX)")
command -v cmake >/dev/null 2>&1 || missing+=("cmake")
command -v ninja >/dev/null 2>&1 || missing+=("ninja-build")
command -v g++ >/dev/null 2>&1 || missing+=("g++")
# Header-only dependencies (the Debian packages scripts/quickstart.sh installs).
have_header() {
  local h="$1" d
  for d in /usr/include /usr/local/include /usr/include/eigen3 /usr/local/include/eigen3 \
           ${DEPS:+"$DEPS/include" "$DEPS/include/eigen3"}; do
    if [ -e "$d/$h" ]; then return 0; fi
  done
  return 1
}
have_header nlohmann/json.hpp || missing+=("nlohmann-json3-dev")
have_header Eigen/Dense || missing+=("libeigen3-dev")
have_header fmt/format.h || missing+=("libfmt-dev")
GXX_VERSION="$(g++ --version 2>/dev/null | head -n1 || echo missing)"
CMAKE_VERSION="$(cmake --version 2>/dev/null | head -n1 || echo missing)"
MACHINE="${MACHINE%\}}, \"gxx\": $(json_str "$GXX_VERSION"), \"cmake\": $(json_str "$CMAKE_VERSION"), \"deps\": $(json_str "${DEPS:-system}")}"
write_summary
if [ "${#missing[@]}" -gt 0 ]; then
  STATUS="failed"
  REASON="a GPU is present but the toolchain is not: missing ${missing[*]}"
  exit 1
fi

# What the cuda preset needs beyond the compiler: fall back rather than fail.
# Warnings are not errors on this machine, whose compilers may be newer than
# CI's (CI gates warnings); the build step counts them for the summary.
cfg=(-DCMAKE_CUDA_COMPILER="$NVCC" -DDISTTRAIN_BUILD_EXAMPLES=OFF -DDISTTRAIN_WARNINGS_AS_ERRORS=OFF)
if [ -n "$CC_CAP" ]; then cfg+=(-DCMAKE_CUDA_ARCHITECTURES="$CC_CAP"); fi  # this GPU only: faster build
notes=()
cuda_root="$(dirname "$(dirname "$(readlink -f "$NVCC")")")"
# NCCL: NCCL_ROOT, the toolkit, the system, else the nvidia-nccl wheel of a
# Python (PyTorch's), which ships nccl.h and libnccl.so.2 without the
# unversioned link FindNCCL looks for: then both are named explicitly.
# A header counts only with a library beside it (a toolkit may ship nccl.h alone).
nccl_h=""
for root in "${NCCL_ROOT:-/nonexistent}" "$cuda_root" /usr/local/cuda /usr /usr/local; do
  if [ -n "$nccl_h" ] || [ ! -f "$root/include/nccl.h" ]; then continue; fi
  for l in "$root"/lib64/libnccl.so* "$root"/lib/libnccl.so* "$root"/lib/x86_64-linux-gnu/libnccl.so*; do
    if [ -e "$l" ]; then nccl_h="$root/include/nccl.h"; fi
  done
done
if [ -z "$nccl_h" ] && command -v python3 >/dev/null 2>&1; then
  # nvidia/nccl/{include,lib} (cu12 wheels) or any nvidia/**/include/nccl.h.
  sites="$(timeout 60 python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null || true)"
  wheel=""
  while IFS= read -r sp; do
    if [ -z "$sp" ] || [ ! -d "$sp/nvidia" ] || [ -n "$wheel" ]; then continue; fi
    h="$(find "$sp/nvidia" -maxdepth 4 -name nccl.h -path '*/include/*' 2>/dev/null | head -n1 || true)"
    if [ -n "$h" ]; then wheel="$(dirname "$(dirname "$h")")"; fi
  done <<<"$sites"
  lib=""
  if [ -n "$wheel" ]; then lib="$(find "$wheel/lib" -maxdepth 1 -name 'libnccl.so*' 2>/dev/null | sort | head -n1 || true)"; fi
  if [ -n "$lib" ]; then
    nccl_h="$wheel/include/nccl.h"
    cfg+=(-DNCCL_INCLUDE_DIR="$wheel/include" -DNCCL_LIBRARY="$lib")
    export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    notes+=("NCCL from the Python wheel at $wheel")
  fi
fi
if [ -z "$nccl_h" ]; then
  cfg+=(-DDISTTRAIN_ENABLE_NCCL=OFF)
  notes+=("no nccl.h: NCCL backend tests and benchmark not built")
fi
if [ "$N_GPUS" -lt 2 ]; then
  cfg+=(-DDISTTRAIN_ENABLE_MPI=OFF)
  notes+=("$N_GPUS GPU: the MPI-bootstrapped NCCL tests and benchmark (2 ranks, a GPU each) are not built")
elif ! command -v mpiexec >/dev/null 2>&1; then
  cfg+=(-DDISTTRAIN_ENABLE_MPI=OFF)
  notes+=("no mpiexec: the MPI-bootstrapped NCCL tests and benchmark are not built")
fi
if ! have_header catch2/catch.hpp && ! have_header catch2/catch_all.hpp; then
  cfg+=(-DDISTTRAIN_BUILD_TESTS=OFF)
  notes+=("no Catch2: gpu.copy_blocks and gpu.nccl_one_rank are not built (benchmarks still run)")
fi
REASON="$(IFS=';'; printf '%s' "${notes[*]-}")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# ---- 3. configure and build what needs a GPU -----------------------------------
if ! run_step configure 150 env PATH="$PATH:$cuda_root/bin" cmake --preset cuda "${cfg[@]}"; then
  STATUS="failed"; REASON="configure failed${REASON:+; $REASON}"; exit 1
fi
build_rc=0
run_step build 270 cmake --build "$BUILD" --target disttrain_gpu_check -j "$JOBS" || build_rc=$?
# g++ "warning:", nvcc "warning #177-D:"; the first few distinct ones are kept.
warned="$(grep -E '(^|[^[:alnum:]_])warning( #[0-9]+-D)?:' "$LOGS/build.log" | sort -u || true)"
BUILD_WARNINGS="{\"count\": $(printf '%s' "$warned" | grep -c . || true), \"first\": $(json_str "$(printf '%s\n' "$warned" | head -n 5)")}"
write_summary
if [ "$build_rc" -ne 0 ]; then
  STATUS="failed"; REASON="build failed${REASON:+; $REASON}"; exit 1
fi

# ---- 4. every test labelled gpu -------------------------------------------------
rm -f "$BUILD/gpu-check-junit.xml"
run_step tests 180 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 120 \
  --no-tests=error --output-junit gpu-check-junit.xml || true
if [ -f "$BUILD/gpu-check-junit.xml" ]; then
  TESTS="[$(sed -n 's/.*<testcase name="\([^"]*\)".* time="\([0-9.]*\)".* status="\([a-z]*\)".*/{"name": "\1", "seconds": \2, "status": "\3"}/p' \
    "$BUILD/gpu-check-junit.xml" | paste -sd, -)]"
  write_summary
fi

# ---- 5. benchmarks ------------------------------------------------------------------
# bench_step <variable> <step name> <binary>: runs a one-process GPU benchmark
# with --json and sets <variable> to its JSON, or to why there is none.
bench_step() {
  local var="$1" name="$2" bin="$BUILD/benchmarks/$3" rc=0
  if [ ! -x "$bin" ]; then
    printf -v "$var" '%s' "{\"skipped\": $(json_str "$3 was not built${REASON:+ ($REASON)}")}"
    return 0
  fi
  run_step "$name" 75 sh -c "'$bin' --json >'$LOGS/$name.json'" || rc=$?
  printf -v "$var" '%s' "$(bench_result "$rc" "$LOGS/$name.json")"
}
bench_step BENCH_COPY bench_copy_blocks bench_copy_blocks_cuda
bench_step BENCH_NCCL_ONE bench_nccl_one_rank bench_nccl_one_rank
if [ -x "$BUILD/benchmarks/bench_nccl_mpi" ]; then
  if [ "$N_GPUS" -lt 2 ]; then
    BENCH_NCCL="{\"skipped\": $(json_str "needs 2 GPUs: NCCL rejects two ranks of one communicator on the same GPU (duplicate GPU); this machine has $N_GPUS")}"
  else
    rc=0
    run_step bench_nccl 90 sh -c \
      "mpiexec -n 2 --oversubscribe '$BUILD/benchmarks/bench_nccl_mpi' --json >'$LOGS/bench_nccl.json'" || rc=$?
    BENCH_NCCL="$(bench_result "$rc" "$LOGS/bench_nccl.json")"
  fi
else
  BENCH_NCCL="{\"skipped\": $(json_str "bench_nccl_mpi was not built${REASON:+ ($REASON)}")}"
fi

# What did not really run on the device: skipped tests (exit 77, or a Catch2
# test that printed SKIPPED) and skipped benchmarks.
skips=()
if [ -f "$BUILD/gpu-check-junit.xml" ]; then
  while IFS= read -r t; do skips+=("$t"); done < <(
    sed -n 's/.*<testcase name="\([^"]*\)".* status="notrun".*/\1/p' "$BUILD/gpu-check-junit.xml")
fi
if grep -q 'SKIPPED' "$BUILD/gpu-check-junit.xml" 2>/dev/null; then  # passed, but said it skipped
  skips+=("test output: $(grep -o 'SKIPPED[^<&]*' "$BUILD/gpu-check-junit.xml" | sort -u | head -n 3 | tr '\n' ' ')")
fi
for b in "$BENCH_COPY" "$BENCH_NCCL" "$BENCH_NCCL_ONE"; do
  case "$b" in '{"skipped"'*) skips+=("a benchmark: ${b:0:160}") ;; esac
done
if [ "${#skips[@]}" -gt 0 ]; then
  REASON="${REASON:+$REASON; }skipped: $(IFS=';'; printf '%s' "${skips[*]}")"
fi
if [ "${#FAILED_STEPS[@]}" -gt 0 ]; then
  STATUS="failed"
  REASON="failed or timed out: ${FAILED_STEPS[*]}${REASON:+; $REASON}"
else
  STATUS="passed"
fi
