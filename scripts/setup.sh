#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: virtualenv, CPU torch first (no GPU), the project with
# its extras, and bubblewrap for the sandbox. Re-running it does nothing when all is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${HARNESSGRID_VENV:-.venv}
EXTRAS=${HARNESSGRID_EXTRAS:-dev}
PY=${PYTHON:-python3}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# bubblewrap is the episode sandbox: without it no episode can run (only with
# --unsafe-no-sandbox), so set-up fails unless HARNESSGRID_ALLOW_NO_SANDBOX=1 says that is meant.
install_bwrap() {  # $@: the prefix to run apt-get with (empty, or sudo)
  local log
  log=$(mktemp)
  if { "$@" apt-get update -qq && "$@" apt-get install -y -qq bubblewrap; } >"$log" 2>&1; then
    rm -f "$log"
    return 0
  fi
  say "installing bubblewrap failed; apt-get said:"
  tail -n 5 "$log" | sed 's/^/    /' >&2
  rm -f "$log"
  return 1
}

if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing bubblewrap (the episode sandbox)"
    install_bwrap || true
  elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
    say "installing bubblewrap with sudo"
    install_bwrap sudo || true
  fi
  if ! command -v bwrap >/dev/null 2>&1; then
    if [ "${HARNESSGRID_ALLOW_NO_SANDBOX:-}" = 1 ]; then
      say "bubblewrap is missing: episodes run only with --unsafe-no-sandbox (no isolation)"
    else
      say "error: bubblewrap (bwrap), the episode sandbox, is missing and could not be installed."
      say "Install it (Debian/Ubuntu: apt-get install -y bubblewrap; Fedora: dnf install"
      say "bubblewrap) and run this again, or set HARNESSGRID_ALLOW_NO_SANDBOX=1 to set up"
      say "without it and run episodes with --unsafe-no-sandbox (no isolation)."
      exit 1
    fi
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"

# Type checkers of other packages (a plugin's `mypy --strict`) cannot follow the editable
# install's import hook: give them the package as a folder (every run: it is cheap, and it picks
# up a module added at the top of core/).
bash scripts/typing_tree.sh "$VENV"

# Skip the install when pyproject.toml and the extras are unchanged since the last success.
stamp="$VENV/.harnessgrid-installed"
want="$(cat pyproject.toml | sha256sum | cut -c1-16)-$EXTRAS"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

$PIP install -q --upgrade pip >/dev/null 2>&1 || true
if ! command -v nvidia-smi >/dev/null 2>&1; then
  # Without a GPU, take the CPU wheel (it lies on disk on our machines) before anything pulls in
  # a multi-GB CUDA build of torch.
  if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    say "installing torch==2.13.0 (CPU build)"
    $PIP install -q "torch==2.13.0"
  fi
fi
say "installing harnessgrid[$EXTRAS] (editable)"
$PIP install -q -e ".[$EXTRAS]"
echo "$want" > "$stamp"
