#!/usr/bin/env bash
# The test command of README.md: set-up (idempotent), then the suite.
#   bash scripts/test.sh            fast suite (every test not marked slow)
#   bash scripts/test.sh --slow     only the slow end-to-end tests, bounded in time
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# Offline by construction: no hub downloads, no litellm price-map fetch on import.
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false

VENV=${HARNESSGRID_VENV:-.venv}
if [ "${1:-}" = "--slow" ]; then
  shift
  # The HTML report is checked by screenshotting it in headless Chromium.
  if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
      && [ "$(id -u)" = 0 ]; then
    echo "[test] installing chromium for the report screenshot test" >&2
    apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null
  fi
  exec timeout --signal=INT "${HARNESSGRID_SLOW_BUDGET_S:-1800}" \
    "$VENV/bin/python" -m pytest -m slow -q "$@"
fi
exec "$VENV/bin/python" -m pytest -m "not slow" -q "$@"
