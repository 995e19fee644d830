#!/usr/bin/env bash
# The API reference: Doxygen over the public headers (docs/Doxyfile), HTML
# only, with every Doxygen warning an error (a wrong @param name, an unknown
# command, a @snippet that names no snippet in examples/snippets/, ...).
#
#   scripts/api_docs.sh [OUTPUT_DIR]
#
# OUTPUT_DIR defaults to build/doxygen; the pages are OUTPUT_DIR/html, start at
# OUTPUT_DIR/html/index.html. Installs Debian's doxygen package when doxygen is
# missing and the script runs as root; otherwise prints the command and exits 1.
# Exit status: 0 with no warning, 1 on any warning (all are printed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
OUT="${1:-build/doxygen}"

if ! command -v doxygen >/dev/null 2>&1; then
  install=(apt-get install -y --no-install-recommends doxygen)
  if [ "$(id -u)" -ne 0 ]; then
    echo "api_docs.sh: doxygen is not installed; as root: apt-get update && ${install[*]}" >&2
    exit 1
  fi
  echo "api_docs.sh: doxygen is not installed: ${install[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
fi
echo "doxygen $(doxygen --version)"

# A fresh output folder: no page of a removed header survives.
rm -rf "$OUT/html"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
log="$OUT/warnings.log"
: >"$log"
start=$(date +%s.%N)
# docs/Doxyfile, with the output folder and the warning log set here (a later
# setting wins). Doxygen runs from the repository root: the Doxyfile's paths are
# relative to it.
rc=0
{ cat docs/Doxyfile; printf 'OUTPUT_DIRECTORY = %s\nWARN_LOGFILE = %s\n' "$OUT" "$log"; } |
  doxygen - || rc=$?
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
warnings=$(grep -c . "$log" || true)
if [ "$rc" -ne 0 ] || [ "$warnings" -ne 0 ]; then
  sed "s|^$ROOT/||" "$log" >&2
  echo "api_docs.sh: FAILED: doxygen exit status $rc, $warnings warning line(s) (${secs} s)" >&2
  exit 1
fi
[ -f "$OUT/html/index.html" ] || { echo "api_docs.sh: no $OUT/html/index.html" >&2; exit 1; }
echo "API reference: $OUT/html/index.html (0 warnings, ${secs} s)"
