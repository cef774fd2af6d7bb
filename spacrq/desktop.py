"""Put spacrq in the desktop's application menu: ``spacrq install-desktop``.

Lab operators double-click an icon; they do not open terminals.  This writes
the ``.desktop`` entry (from ``resources/spacrq.desktop``) and the icons (the
SVG and every PNG size) under the XDG data folder, for this user only, with
``Exec`` pointing at the spacrq that ran the command: the bundle's executable,
or the ``spacrq-gui`` of the environment spacrq is installed in.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping, Sequence

from spacrq.procs import module_argv
from spacrq.resources import ICON_SIZES, resource_path
from spacrq.runfiles import RunFileError, refuse_link, write_bytes, write_text

__all__ = ["DesktopError", "install_desktop", "remove_desktop", "launcher_argv", "entry_for",
           "desktop_exec", "data_home"]

ENTRY = "spacrq.desktop"
ICON = "spacrq"


class DesktopError(Exception):
    """One sentence naming the fix."""


def data_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, else ``~/.local/share``."""
    env = os.environ if env is None else env
    value = env.get("XDG_DATA_HOME", "")
    if value and os.path.isabs(value):
        return Path(value)
    home = env.get("HOME", "")
    if not home:
        raise DesktopError("HOME is not set, and the menu entry goes in your home folder; "
                           "set HOME (or XDG_DATA_HOME) and try again")
    return Path(home) / ".local" / "share"


def launcher_argv() -> list[str]:
    """What the menu entry starts: the bundle itself, else this environment's window command."""
    if getattr(sys, "frozen", False):
        return module_argv("spacrq")  # the bundle's executable alone opens the window
    gui = Path(sys.executable).with_name("spacrq-gui")
    if gui.is_file() and os.access(gui, os.X_OK):
        return [str(gui)]
    return module_argv("spacrq", "gui")


def desktop_exec(argv: Sequence[str]) -> str:
    """An ``Exec=`` value for ``argv``: quoted as the desktop entry spec says, ``%`` doubled.

    Nothing in it reaches a shell: the desktop splits it into arguments itself.
    """
    out = []
    for arg in argv:
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in str(arg)):
            # a line break would end the Exec= line and start a key of its own choosing
            raise DesktopError(f"the program path {str(arg)!r} holds a line break or control "
                               "character, which a desktop entry cannot hold; install spacrq "
                               "in a folder whose path has none")
        arg = str(arg).replace("%", "%%")
        if arg and not any(c in arg for c in " \t\n\"'\\><~|&;$*?#()`"):
            out.append(arg)
            continue
        inner = "".join("\\" + c if c in '"`$\\' else c for c in arg)
        out.append('"' + inner + '"')
    return " ".join(out).replace("\\", "\\\\")  # string values escape backslashes once more


def entry_for(argv: Sequence[str], template: str | None = None) -> str:
    """The menu entry: the template with ``Exec``/``TryExec`` naming ``argv``."""
    text = template if template is not None else resource_path(ENTRY).read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines():
        if line.startswith("TryExec="):
            continue
        if line.startswith("Exec="):
            lines.append(f"TryExec={str(argv[0]).replace(chr(92), chr(92) * 2)}")
            lines.append(f"Exec={desktop_exec(argv)}")
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def _targets(data: Path) -> list[tuple[Path, Path]]:
    """(resource, installed path) for every icon."""
    icons = data / "icons" / "hicolor"
    pairs = [(resource_path("spacrq.svg"), icons / "scalable" / "apps" / f"{ICON}.svg")]
    for size in ICON_SIZES:
        folder = f"{size}x{size}"
        pairs.append((resource_path(f"icons/{folder}/spacrq.png"), icons / folder / "apps" / f"{ICON}.png"))
    return pairs


def install_desktop(env: Mapping[str, str] | None = None,
                    argv: Sequence[str] | None = None) -> list[Path]:
    """Install the menu entry and icons for this user; returns the files written."""
    data = data_home(env)
    entry = data / "applications" / ENTRY
    written = []
    own = "remove the link, and spacrq writes a file of its own there"
    try:
        # every refusal before anything is written: a refused install changes no file
        for _, target in _targets(data):
            refuse_link(target, "icon file", own)
        refuse_link(entry, "menu entry", own)
        for source, target in _targets(data):
            target.parent.mkdir(parents=True, exist_ok=True)
            written.append(write_bytes(target, source.read_bytes()))
        entry.parent.mkdir(parents=True, exist_ok=True)
        written.append(write_text(entry, entry_for(list(argv or launcher_argv()))))
    except RunFileError as exc:
        raise DesktopError(str(exc)) from None
    except OSError as exc:
        raise DesktopError(f"could not write {exc.filename or data}: {exc.strerror or exc}; "
                           "check that the folder is yours and writable") from None
    return written


def remove_desktop(env: Mapping[str, str] | None = None) -> list[Path]:
    """Take the menu entry and icons away again; returns the files removed.  A link at one
    of their paths is not spacrq's (it never makes one): it is left where it is."""
    data = data_home(env)
    removed = []
    for path in [data / "applications" / ENTRY] + [t for _s, t in _targets(data)]:
        if path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(path)
    return removed
