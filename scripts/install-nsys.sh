#!/usr/bin/env bash
# Installs Nsight Systems from Debian's non-free component when nsys is missing (needs root and apt).
# Elsewhere it says how to get it and exits non-zero. See ../shared/NSYS.md for why these packages.
set -euo pipefail

if command -v nsys >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || ! grep -qs "ID=debian" /etc/os-release; then
  echo "nsys is not installed. On Debian as root this script installs it; otherwise install Nsight Systems" \
       "from https://developer.nvidia.com/nsight-systems (or your distribution) and put nsys on PATH." >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Enable contrib and non-free in either apt sources format.
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed -i 's/^Components: main$/Components: main contrib non-free/' /etc/apt/sources.list.d/debian.sources
fi
if [ -f /etc/apt/sources.list ]; then
  sed -i -E 's/^(deb\s+\S+\s+\S+\s+main)\s*$/\1 contrib non-free/' /etc/apt/sources.list
fi
apt-get update -q
apt-get install -y -q --no-install-recommends nsight-systems nsight-systems-target
nsys --version
