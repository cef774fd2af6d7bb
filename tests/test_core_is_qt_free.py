"""The core never imports Qt: checked statically and by importing it in a clean interpreter."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "spacrq"
QT = ("PySide6", "PyQt5", "PyQt6", "PySide2", "pyqtgraph", "shiboken6")


def _core_files():
    for path in PKG.rglob("*.py"):
        if "ui" in path.relative_to(PKG).parts[:1]:
            continue
        yield path


def test_no_core_module_imports_qt():
    offenders = []
    for path in _core_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in QT:
                    offenders.append(f"{path.relative_to(PKG.parent)}:{node.lineno} imports {name}")
    assert offenders == [], "\n".join(offenders)
    assert len(list(_core_files())) >= 5  # the walk really saw the core


def test_importing_every_core_module_loads_no_qt():
    modules = sorted(
        ".".join(p.relative_to(PKG.parent).with_suffix("").parts).replace(".__init__", "")
        for p in _core_files() if p.name != "__main__.py"
    )
    code = (
        "import importlib, sys\n"
        f"mods = {modules!r}\n"
        "for m in mods:\n"
        "    try: importlib.import_module(m)\n"
        "    except ImportError as e: print('skip', m, e)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {QT!r}]\n"
        "print('QT', bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
