#!/usr/bin/env bash
# Formats every tracked C++/CUDA source with the repository's .clang-format
# (clang-format >= 14), or with --check lists the files that differ and fails.
# Afterwards no header line may start with module/import/export (nvcc reads it
# as a C++20 module directive); ctest's packaging.module_lines checks that too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
command -v "$CLANG_FORMAT" >/dev/null || { echo "format.sh: $CLANG_FORMAT not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' '*.cu' '*.cuh')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ "${#bad[@]}" -gt 0 ]; then
    printf 'not formatted: %s\n' "${bad[@]}"
    echo "run scripts/format.sh to fix (${#bad[@]} file(s))"
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted"
else
  "$CLANG_FORMAT" -i "${files[@]}"
fi
cmake -DSOURCE_DIR="$PWD" -P tests/packaging/module_lines.cmake
