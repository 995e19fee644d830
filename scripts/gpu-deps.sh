#!/usr/bin/env bash
# Bundles the third-party files the cuda preset needs beyond the CUDA toolkit
# (nlohmann/json, Eigen, fmt, Catch2: headers, CMake package files, fmt's
# shared library) from this machine's Debian packages into one relocatable
# prefix, for a GPU machine that has CUDA but cannot install packages:
#
#   scripts/gpu-deps.sh [DIR]          # default: build/gpu-deps (about 12 MB)
#   ... copy DIR there, then:  scripts/gpu-check.sh --deps DIR
#
# The prefix mirrors /usr (include/, lib/, share/), so the packages' own CMake
# files, which locate their headers relative to themselves, work from it.
# Needs the Debian packages scripts/quickstart.sh installs; says which is
# missing otherwise. x86-64 only (fmt's library is this machine's build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
DEST="${1:-$ROOT/build/gpu-deps}"
PACKAGES=(nlohmann-json3-dev libeigen3-dev libfmt-dev libfmt9 catch2)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "gpu-deps: missing Debian packages: ${missing[*]} (sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi

rm -rf "$DEST"
mkdir -p "$DEST"
n=0
for p in "${PACKAGES[@]}"; do
  while IFS= read -r f; do
    case "$f" in
      /usr/include/*|/usr/lib/*|/usr/share/cmake/*|/usr/share/eigen3/cmake/*) ;;
      *) continue ;;
    esac
    [ -f "$f" ] || continue  # directories come with their files; links are followed below
    rel="${f#/usr/}"
    mkdir -p "$DEST/$(dirname "$rel")"
    cp -L "$f" "$DEST/$rel"  # a link becomes a copy: the carried tree holds no links
    n=$((n + 1))
  done < <(dpkg -L "$p")
done
echo "gpu-deps: $n files from ${PACKAGES[*]} in $DEST ($(du -sh "$DEST" | cut -f1))"
