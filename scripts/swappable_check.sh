#!/usr/bin/env bash
# clang-tidy's bugprone-easily-swappable-parameters over every public header,
# as a ratchet: adjacent parameters of one type that a caller can swap without
# a compile error. Strong ids (core/topology.hpp: stage_id, replica_id, ...)
# or a named struct are the fix; the check's options are those of .clang-tidy
# (ModelImplicitConversions off: a swap of, say, a std::size_t and a double
# already fails our -Wconversion -Werror builds).
#
#   scripts/swappable_check.sh            # check against the baseline
#   scripts/swappable_check.sh --update   # rewrite the baseline
#
# The findings are compared, as "header: function", with
# tests/packaging/swappable_baseline.txt, the functions not yet fixed. It
# fails on a finding that is not in the baseline (new code) and on a baseline
# line with no finding left (fixed: delete the line), so the list only
# shrinks. Needs clang-tidy (Debian: apt-get install clang-tidy); the MPI
# backend is checked when mpi.h is found. CLANG_TIDY overrides the binary.
# Exit status: 0 when the findings equal the baseline, 1 otherwise.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UPDATE=no
case "${1:-}" in
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --update) UPDATE=yes ;;
  "") ;;
  *) echo "swappable_check.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
TIDY="${CLANG_TIDY:-clang-tidy}"
if ! command -v "$TIDY" >/dev/null 2>&1; then
  echo "swappable_check.sh: $TIDY not found (Debian: apt-get install clang-tidy)" >&2
  exit 1
fi
BASELINE=tests/packaging/swappable_baseline.txt
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# One TU with every public header that compiles on the host (not the CUDA,
# NCCL and libturbojpeg ones; the MPI backend when mpi.h is there).
flags=(-std=c++20 -Iinclude)
eigen="$(pkg-config --cflags-only-I eigen3 2>/dev/null || echo -I/usr/include/eigen3)"
# shellcheck disable=SC2206  # pkg-config output: one or more -I flags
flags+=($eigen)
mpi_inc=""
for d in /usr/lib/x86_64-linux-gnu/openmpi/include /usr/include/x86_64-linux-gnu/mpich /usr/include/mpi; do
  [ -f "$d/mpi.h" ] && { mpi_inc="$d"; break; }
done
[ -n "$mpi_inc" ] && flags+=(-isystem "$mpi_inc" -DDISTTRAIN_HAS_MPI)
: >"$TMP/all.cpp"
while IFS= read -r h; do
  case "$h" in
    */nccl_backend.hpp|*_cuda.hpp|*/cuda_streams.hpp|*/device_route_transfer.hpp|*/jpeg.hpp) continue ;;
    */mpi_backend.hpp) [ -n "$mpi_inc" ] || continue ;;
    */detail/*) continue ;;  # reached through the public headers
  esac
  printf '#include "%s"\n' "${h#include/}" >>"$TMP/all.cpp"
done < <(find include/disttrain -name '*.hpp' | LC_ALL=C sort)

cat >"$TMP/.clang-tidy" <<'EOF'
Checks: '-*,bugprone-easily-swappable-parameters'
HeaderFilterRegex: 'include/disttrain/'
EOF
# The check's options come from the project's .clang-tidy.
opts="$(sed -n '/bugprone-easily-swappable-parameters\./p' .clang-tidy)"
if [ -n "$opts" ]; then printf 'CheckOptions:\n%s\n' "$opts" >>"$TMP/.clang-tidy"; fi

"$TIDY" --quiet --config-file="$TMP/.clang-tidy" "$TMP/all.cpp" -- "${flags[@]}" \
  >"$TMP/out" 2>"$TMP/err" || true
if grep -q 'error:' "$TMP/out"; then
  echo "swappable_check.sh: the headers did not compile under clang-tidy:" >&2
  grep -A3 'error:' "$TMP/out" | head -20 >&2
  exit 1
fi
# "include/disttrain/x.hpp: function" per finding, sorted.
sed -nE "s|^.*(include/disttrain/[^:]+):[0-9]+:[0-9]+: warning: .* of '([^']+)' of similar type.*|\1: \2|p" \
  "$TMP/out" | LC_ALL=C sort -u >"$TMP/found"

if [ "$UPDATE" = yes ]; then
  { sed -n '/^#/p' "$BASELINE" 2>/dev/null; cat "$TMP/found"; } >"$TMP/new"
  mv "$TMP/new" "$BASELINE"
  echo "swappable_check.sh: $BASELINE rewritten ($(wc -l <"$TMP/found") functions)"
  exit 0
fi
grep -v '^#' "$BASELINE" | sed '/^$/d' | LC_ALL=C sort -u >"$TMP/base"
new="$(comm -23 "$TMP/found" "$TMP/base")"
fixed="$(comm -13 "$TMP/found" "$TMP/base")"
echo "swappable_check.sh: $(wc -l <"$TMP/found") functions with easily swapped parameters, $(wc -l <"$TMP/base") in the baseline"
status=0
if [ -n "$new" ]; then
  echo "New findings (use strong ids or a named struct; see docs/architecture.md, \"Conventions\"):"
  sed 's/^/  /' <<<"$new"
  status=1
fi
if [ -n "$fixed" ]; then
  echo "Fixed, delete from $BASELINE:"
  sed 's/^/  /' <<<"$fixed"
  status=1
fi
[ "$status" -eq 0 ] && echo "swappable_check.sh: OK (no new finding)"
exit "$status"
