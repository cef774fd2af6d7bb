"""Render resources/spacrq.svg to the PNG sizes desktops look for (run after editing the SVG).

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icons.py

Qt's own SVG renderer draws them, so remaking the icons needs nothing beyond
spacrq's dependencies.  The PNGs are committed: a desktop without SVG support
(and the 16-pixel tray) still gets a sharp icon.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "resources"
sys.path.insert(0, str(HERE.parent))


def render(svg: Path, size: int, out: Path) -> None:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    QSvgRenderer(str(svg)).render(painter)
    painter.end()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(out), "PNG"):
        raise SystemExit(f"render_icons: could not write {out}")


def main() -> int:
    from resources import ICON_SIZES
    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841 (fonts need an app)
    svg = HERE / "spacrq.svg"
    for size in ICON_SIZES:
        out = HERE / "icons" / f"{size}x{size}" / "spacrq.png"
        render(svg, size, out)
        print(f"wrote {out.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
