#!/usr/bin/env bash
# The main job of README.md: set-up (idempotent), then `harnessgrid demo` -- the paper's
# comparison at CPU scale (train a micro model through one harness and through the 18-run
# orthogonal array of harnesses, evaluate both on held-out harnesses and emulated shells).
#   bash scripts/demo.sh              default (see README for its time)
#   bash scripts/demo.sh --quick      a first look in a few minutes
#   bash scripts/demo.sh --full       all five conditions, three seeds
# Extra arguments go to `harnessgrid demo` (e.g. --out DIR). Each profile writes its own folder,
# OUT/PROFILE (runs/demo/default/report.html, results.json, well-formed.png, ...), so the
# profiles share an --out without mixing; re-running a command reuses its finished stages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/harnessgrid demo "$@"
