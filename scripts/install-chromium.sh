#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests of report.html (Playwright drives it; its own browser
# download host is out of reach) when it is missing and this runs as root on Debian. Elsewhere it says
# so and succeeds: the browser tests then skip with the reason.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || ! grep -qs "ID=debian" /etc/os-release; then
  echo "chromium is not installed (the browser tests of report.html will skip): on Debian as root this" \
       "script installs it; elsewhere install Chromium and set TRACEKIT_CHROMIUM to its path." >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium
chromium --version
