#!/usr/bin/env bash
# Build the one-folder bundle: dist/spacrq/spacrq runs the window, the commands and the whole night.
# Usage: packaging/build.sh [DISTDIR]   (default: dist/ beside this checkout; work files in build/)
# Needs the build extra: .venv/bin/pip install -e '.[build]'
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
dist="${1:-$here/dist}"
work="${SPACRQ_BUILD_WORK:-$here/build/pyinstaller}"
if ! "$py" -c "import PyInstaller" 2>/dev/null; then
  echo "build: PyInstaller is not installed in $py; install it: $py -m pip install -e '$here[build]'" >&2
  exit 2
fi
"$py" -m PyInstaller --noconfirm --log-level WARN --distpath "$dist" --workpath "$work" \
  "$here/packaging/spacrq.spec"
echo "built $dist/spacrq/spacrq"
