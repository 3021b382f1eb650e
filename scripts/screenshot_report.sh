#!/usr/bin/env bash
# Screenshot an evaluation's report.html in headless Chromium, to check that the page renders
# (tables and inline plots) without a server.
#   bash scripts/screenshot_report.sh DIR OUT.png [WIDTH,HEIGHT]
# DIR is an `harnessgrid eval --out` directory (run `harnessgrid report DIR` first if it has no
# report.html). Needs the Debian package `chromium`; installs it with apt-get when missing and
# running as root.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR OUT.png [WIDTH,HEIGHT]" >&2
  exit 2
fi
dir=$1
out=$2
size=${3:-1280,2000}
page="$(cd "$dir" && pwd)/report.html"
if [ ! -f "$page" ]; then
  echo "error: $page not found; run \`harnessgrid report $dir\` first" >&2
  exit 2
fi

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "chromium not found; installing it with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2
    browser=$(command -v chromium)
  else
    echo "error: chromium not found; install it (apt-get install chromium)" >&2
    exit 2
  fi
fi

mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
profile=$(mktemp -d -t hg-chromium-XXXXXX)
trap 'rm -rf "$profile"' EXIT
rm -f "$out"
# A fresh profile and no background services: nothing is fetched, nothing is remembered.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --screenshot="$out" --window-size="$size" \
  "file://$page" >"$profile/chromium.log" 2>&1 || {
  cat "$profile/chromium.log" >&2
  exit 1
}
if [ ! -s "$out" ]; then
  echo "error: chromium wrote no screenshot" >&2
  cat "$profile/chromium.log" >&2
  exit 1
fi
echo "$out"
