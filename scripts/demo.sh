#!/usr/bin/env bash
# The main job of README.md: set-up (idempotent), then `harnessgrid demo` -- the paper's
# experiment at CPU scale (one warm start, then RL through one harness and through the 18-run
# orthogonal array of harnesses, scored before and after RL on held-out harnesses and unseen
# levels of the micro space, on a leak-free test split).
#   bash scripts/demo.sh              default (see README for its time and its figures)
#   bash scripts/demo.sh --quick      a pipeline check in a few minutes
#   bash scripts/demo.sh --full       every condition, with the negated-advantage control
#   bash scripts/demo.sh --validation score on the validation split (for tuning a budget)
# Extra arguments go to `harnessgrid demo` (e.g. --out DIR, --seeds N). Each profile writes its
# own folder, OUT/PROFILE (runs/demo/default/report.html, results.json, pass1.png, ...), so the
# profiles share an --out without mixing; re-running a command reuses its finished stages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/harnessgrid demo "$@"
