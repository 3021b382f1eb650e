#!/usr/bin/env bash
# Let type checkers see `harnessgrid` in an editable install (scripts/setup.sh runs this).
#
# pyproject's package-dir assembles `harnessgrid` from top-level folders (core/ is `harnessgrid`,
# plugins/ is `harnessgrid.plugins`, ...), so `pip install -e` installs an import hook (the
# setuptools editable finder) rather than a folder on the path, and mypy and pyright, which read
# folders and .pth files, find no `harnessgrid`: a plugin package's `mypy --strict` fails with
# import-not-found. This links build/typing/harnessgrid-stubs, the package as type checkers look
# for it (a PEP 561 stub-only name, which `import` can never load, so the running code is still
# the editable install's), and names build/typing in a .pth of the venv's site-packages.
# Idempotent; re-run it after adding a module at the top of core/ (subfolders are linked whole).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-${HARNESSGRID_VENV:-.venv}}
tree="$PWD/build/typing"
stubs="$tree/harnessgrid-stubs"
rm -rf "$stubs" && mkdir -p "$stubs"
for entry in core/*; do
  [ "$(basename "$entry")" = __pycache__ ] || ln -s "$PWD/$entry" "$stubs/$(basename "$entry")"
done
# A stub-only package's top module must be a .pyi; it is core/__init__.py itself.
ln -s "$PWD/core/__init__.py" "$stubs/__init__.pyi"
for sub in plugins trainer evaluation; do ln -s "$PWD/$sub" "$stubs/$sub"; done
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$tree" > "$site/harnessgrid_typing.pth"
