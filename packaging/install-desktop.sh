#!/usr/bin/env bash
# Put spacrq in the desktop's application menu for this user: the `spacrq install-desktop` command.
# Usage: packaging/install-desktop.sh [path/to/venv]   (default: .venv beside this checkout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$here/.venv}"
if [ ! -x "$venv/bin/spacrq" ]; then
  echo "install-desktop: $venv/bin/spacrq not found; install spacrq first: python3 -m venv .venv && .venv/bin/pip install -e ." >&2
  exit 2
fi
exec "$venv/bin/spacrq" install-desktop
