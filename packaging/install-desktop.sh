#!/usr/bin/env bash
# Put spacrq in the desktop's application menu for this user, so an operator can double-click it.
# Usage: packaging/install-desktop.sh [path/to/venv]   (default: .venv beside this checkout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$here/.venv}"
if [ ! -x "$venv/bin/spacrq-gui" ]; then
  echo "install-desktop: $venv/bin/spacrq-gui not found; install spacrq first: python3 -m venv .venv && .venv/bin/pip install -e ." >&2
  exit 2
fi
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
icons="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/scalable/apps"
mkdir -p "$apps" "$icons"
cp "$here/spacrq/resources/spacrq.svg" "$icons/spacrq.svg"
sed "s|^Exec=.*|Exec=$venv/bin/spacrq-gui|" "$here/packaging/spacrq.desktop" > "$apps/spacrq.desktop"
chmod 644 "$apps/spacrq.desktop"
echo "installed $apps/spacrq.desktop"
