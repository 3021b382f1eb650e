#!/usr/bin/env bash
# The main job of README.md: set-up (idempotent), then design → schedule → scripted episodes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
HG=".venv/bin/harnessgrid"
PY=".venv/bin/python"

echo "== the 18-run orthogonal design over the 3^5 harness space"
$HG design show --kind oa
echo "== its diagnostics"
$HG design check
echo "== 18 held-out in-space configurations for evaluation"
$HG design holdout --n 18
echo "== the first training steps: each task's anchor harness, then its Hamming neighbour"
$HG schedule preview --steps 3 --tasks-per-step 4
echo "== scripted oracle and null policy through every training harness (sandboxed episodes)"
$PY examples/scripted_smoke.py --suite grid-bench --tasks 3
echo "== the paper's evaluation protocol with the scripted oracle: held-out in-space harnesses,"
echo "   the emulated Claude Code and OpenClaw shells (out-of-space), and one original harness"
$HG eval --policy scripted --suites grid-bench,grid-long --limit 4 --runs 1 \
  --settings in-space,out-of-space,original --original S0-T0-O0-C0-W0 --out runs/demo --quiet
$HG report runs/demo
echo "== report written to runs/demo/report.html (tables, plots) and runs/demo/report.md"
