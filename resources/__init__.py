"""spacrq's icons and desktop entry, wherever spacrq runs from.

The files live in the checkout's top-level ``resources/`` folder; the wheel
ships that folder as the package ``spacrq.resources`` (setuptools'
``package-dir``), an editable install maps the package onto the folder, and
the bundle carries it as data beside this module.  So the one question
"where is the icon?" has one answer: the folder this module sits in.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["resource_path", "ICON_SIZES", "RESOURCES"]

#: the folder holding every resource
RESOURCES = Path(__file__).resolve().parent

#: the PNG sizes rendered from spacrq.svg (packaging/render_icons.py), one folder each
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256)


def resource_path(name: str) -> Path:
    """The path of resource ``name`` (``"spacrq.svg"``, ``"icons/48x48/spacrq.png"``).

    :raises FileNotFoundError: naming the file, when this install lacks it —
        a broken install, to be fixed by reinstalling, never silently iconless.
    """
    path = RESOURCES / name
    if not path.is_file():
        raise FileNotFoundError(f"spacrq's resource {name} is missing from {RESOURCES}; "
                                "reinstall spacrq")
    return path
