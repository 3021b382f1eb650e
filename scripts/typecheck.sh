#!/usr/bin/env bash
# mypy --strict on the import package. The package is assembled from several folders
# (pyproject's package-dir), which mypy cannot follow through the editable finder, so this
# builds a tree of symlinks named `harnessgrid` and checks that.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck
rm -rf "$tree" && mkdir -p "$tree/harnessgrid"
for entry in core/*; do ln -s "$PWD/$entry" "$tree/harnessgrid/$(basename "$entry")"; done
for sub in plugins trainer evaluation; do ln -s "$PWD/$sub" "$tree/harnessgrid/$sub"; done
VENV=${HARNESSGRID_VENV:-.venv}
# core/ is held to --strict; plugins are checked with the same settings.
MYPYPATH="$tree" exec "$VENV/bin/python" -m mypy --strict --follow-imports=silent \
  --ignore-missing-imports -p harnessgrid "$@"
