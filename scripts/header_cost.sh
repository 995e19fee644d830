#!/usr/bin/env bash
# What including a disttrain header costs a translation unit: for each header,
# the g++ -fsyntax-only parse time (median of --runs runs; wall and user CPU
# seconds) and the size of the preprocessed TU (lines, KiB: independent of
# machine load), and, measured in the same run, the user CPU seconds of a TU
# that includes only the standard headers the header reaches ("std s"): the
# floor no change to disttrain's own code can go below, and a baseline that
# tells a slow machine from a heavy header (docs/header_cost.md). With g++,
# also the memory g++ allocated for the TU ("gcc MB", -ftime-report's GGC
# total): it does not depend on the machine's load, so two checkouts compare
# on a noisy machine where their times do not ("-" with other compilers).
# Headers: disttrain.hpp, every part umbrella (<part>.hpp),
# reorder/reorderer.hpp, comm/route.hpp, and the component headers
# cost/calibration.hpp (Eigen) and core/format.hpp (fmt).
#
#   scripts/header_cost.sh [--runs N] [--markdown] [HEADER...]
#
# HEADER is a path under include/ (e.g. disttrain/plan.hpp). Compiler: $CXX
# (default g++), flags -std=c++20 -I include $CXXFLAGS, plus Eigen's include
# directory for headers of the calibration component only (the core must not
# need it).
# docs/header_cost.md records a run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CXX="${CXX:-g++}"
RUNS=3
MARKDOWN=no
headers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --markdown) MARKDOWN=yes; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "header_cost.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) headers+=("$1"); shift ;;
  esac
done
if [ "${#headers[@]}" -eq 0 ]; then
  headers=(disttrain/disttrain.hpp)
  for h in include/disttrain/*.hpp; do
    [ "$h" = include/disttrain/disttrain.hpp ] || headers+=("${h#include/}")
  done
  headers+=(disttrain/reorder/reorderer.hpp disttrain/comm/route.hpp
            disttrain/cost/calibration.hpp disttrain/core/format.hpp)
fi
EIGEN_INC="$(pkg-config --cflags-only-I eigen3 2>/dev/null || echo -I/usr/include/eigen3)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [ "$MARKDOWN" = yes ]; then
  printf '| header | parse s (wall) | parse s (user CPU) | std headers only, s (user CPU) | g++ allocations, MB | preprocessed lines | preprocessed KiB |\n'
  printf '|---|---:|---:|---:|---:|---:|---:|\n'
else
  printf '%-36s %10s %10s %8s %8s %12s %10s\n' header "wall s" "user s" "std s" "gcc MB" "pp lines" "pp KiB"
fi
for h in "${headers[@]}"; do
  [ -f "include/$h" ] || { echo "header_cost.sh: no include/$h" >&2; exit 1; }
  # shellcheck disable=SC2206  # CXXFLAGS: words on purpose
  flags=(-std=c++20 -Iinclude ${CXXFLAGS:-})
  case "$h" in disttrain/cost/calibration.hpp|disttrain/cost/profiler.hpp|disttrain/cost/format.hpp)
    # shellcheck disable=SC2206  # pkg-config output: one or more -I flags
    flags+=($EIGEN_INC) ;;
  esac
  printf '#include "%s"\n' "$h" >"$TMP/tu.cpp"
  # The standard headers that the disttrain headers reached include directly.
  "$CXX" "${flags[@]}" -E -H "$TMP/tu.cpp" 2>&1 >/dev/null |
    sed -n 's/^\.* \(.*include\/disttrain\/.*\)$/\1/p' | sort -u |
    xargs -r grep -h '^#include <[a-z_]*>' | sort -u >"$TMP/std.cpp"
  : >"$TMP/wall"
  : >"$TMP/user"
  : >"$TMP/std"
  for _ in $(seq "$RUNS"); do
    TIMEFORMAT='%R %U'
    { time "$CXX" "${flags[@]}" -fsyntax-only "$TMP/tu.cpp"; } 2>"$TMP/t"
    read -r wall user <"$TMP/t"
    echo "$wall" >>"$TMP/wall"
    echo "$user" >>"$TMP/user"
    { time "$CXX" "${flags[@]}" -fsyntax-only "$TMP/std.cpp"; } 2>"$TMP/t"
    read -r _ user <"$TMP/t"
    echo "$user" >>"$TMP/std"
  done
  # g++'s GGC total, e.g. "413M" or "857k"; other compilers print no such line.
  mb="$("$CXX" "${flags[@]}" -fsyntax-only -ftime-report "$TMP/tu.cpp" 2>&1 |
    awk '/^ *TOTAL *:/ { v = $NF; u = substr(v, length(v)); n = substr(v, 1, length(v) - 1) + 0
                         if (u == "M") print n; else if (u == "k") printf "%.1f\n", n / 1024; else if (u == "G") print n * 1024 }')" || true
  [ -n "$mb" ] || mb="-"
  "$CXX" "${flags[@]}" -E -P "$TMP/tu.cpp" >"$TMP/pp.cpp"
  lines="$(wc -l <"$TMP/pp.cpp")"
  kib="$(( $(wc -c <"$TMP/pp.cpp") / 1024 ))"
  wall="$(median <"$TMP/wall")"
  user="$(median <"$TMP/user")"
  std="$(median <"$TMP/std")"
  if [ "$MARKDOWN" = yes ]; then
    # shellcheck disable=SC2016  # the backquotes are markdown
    printf '| `%s` | %.2f | %.2f | %.2f | %s | %s | %s |\n' "$h" "$wall" "$user" "$std" "$mb" "$lines" "$kib"
  else
    printf '%-36s %10.2f %10.2f %8.2f %8s %12s %10s\n' "$h" "$wall" "$user" "$std" "$mb" "$lines" "$kib"
  fi
done
