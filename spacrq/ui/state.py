"""What the window remembers between starts: where it was, how it was laid out, what was open.

Kept with QSettings in one ini file (``$SPACRQ_SETTINGS``, else Qt's per-user
config folder ``spacrq/spacrq.ini``): window geometry, every splitter, the
last pane, table column widths, the last workspace and the recent ones.

Settings are a convenience, never a reason not to start.  A damaged file is
moved aside (``spacrq.ini.damaged``), the window starts with its defaults and
says so once; a value of the wrong kind is ignored on its own.  A remembered
workspace that has since gone (an unmounted share) is dropped from the list,
never created again.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QCoreApplication, QSettings, QStandardPaths

if TYPE_CHECKING:  # the widgets are imported where used: restoring runs before the first paint
    from PySide6.QtWidgets import QHeaderView, QMainWindow, QTabWidget, QWidget

RECENT_MAX = 8
FILE_NAME = "spacrq.ini"


def settings_path() -> Path:
    given = os.environ.get("SPACRQ_SETTINGS")
    if given:
        return Path(given).expanduser()
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    return Path(base or Path.home() / ".config") / "spacrq" / FILE_NAME


def _damaged(path: Path) -> str:
    """Why the file at ``path`` is not a settings file spacrq wrote, or ''."""
    try:
        if not path.exists():
            return ""
        if path.is_symlink() or not path.is_file():
            return "it is not a plain file"
        data = path.read_bytes()
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if b"\x00" in data:
        return "it holds binary garbage"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not text"
    return ""


def _settings(path: Path) -> QSettings:
    """The settings object, owned by the application: left to Python, it would be destroyed
    (and written out) by the garbage collector on whatever thread collects it."""
    return QSettings(str(path), QSettings.Format.IniFormat, QCoreApplication.instance())


class WindowState:
    """The window's remembered state; :attr:`note` says when the file had to be set aside."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else settings_path()
        self.note = ""
        why = _damaged(self.path)
        self.settings = _settings(self.path)
        if not why and self.settings.status() != QSettings.Status.NoError:
            why = "it could not be parsed"
        if why:
            self.settings.setParent(None)  # dropped now, by this thread
            self.settings = None
            aside = self.path.with_name(self.path.name + ".damaged")
            try:
                if self.path.is_dir() and not self.path.is_symlink():
                    raise OSError("a folder is in the way")
                os.replace(self.path, aside)
                moved = f"it was moved to {aside}"
            except OSError:
                moved = "it was left as it is and will not be written"
            self.note = (f"The settings file {self.path} was ignored ({why}); the window starts "
                         f"with its defaults and {moved}.")
            if moved.startswith("it was moved"):
                self.settings = _settings(self.path)

    # -- plain values ------------------------------------------------------------
    def _get(self, key: str, kind: type, default=None):
        if self.settings is None:
            return default
        value = self.settings.value(key)
        if kind is list:
            if isinstance(value, str):
                value = [value]
            return [str(v) for v in value] if isinstance(value, (list, tuple)) else default
        if kind is QByteArray:
            return value if isinstance(value, QByteArray) else default
        if kind is int:
            try:
                return int(value)
            except (TypeError, ValueError):
                return default
        return value if isinstance(value, kind) else default

    def _set(self, key: str, value) -> None:
        if self.settings is not None:
            self.settings.setValue(key, value)

    def sync(self) -> None:
        if self.settings is not None:
            self.settings.sync()

    # -- workspaces --------------------------------------------------------------
    def last_workspace(self) -> str | None:
        value = self._get("workspace/last", str)
        return value or None

    def recent_workspaces(self) -> list[str]:
        return [p for p in self._get("workspace/recent", list, []) if p][:RECENT_MAX]

    def remember_workspace(self, root: str | os.PathLike) -> None:
        root = str(root)
        recent = [root] + [p for p in self.recent_workspaces() if p != root]
        self._set("workspace/last", root)
        self._set("workspace/recent", recent[:RECENT_MAX])

    def forget_workspace(self, root: str | os.PathLike) -> None:
        root = str(root)
        self._set("workspace/recent", [p for p in self.recent_workspaces() if p != root])
        if self.last_workspace() == root:
            self._set("workspace/last", "")

    # -- the window --------------------------------------------------------------
    def save_window(self, window: QMainWindow, tabs: QTabWidget, panes: dict[str, QWidget]) -> None:
        self._set("window/geometry", window.saveGeometry())
        self._set("window/state", window.saveState())
        self._set("window/pane", tabs.tabText(tabs.currentIndex()))
        for title, pane in panes.items():
            self.save_pane(title, pane)

    def restore_window(self, window: QMainWindow) -> None:
        geometry = self._get("window/geometry", QByteArray)
        if geometry is not None:
            window.restoreGeometry(geometry)
        state = self._get("window/state", QByteArray)
        if state is not None:
            window.restoreState(state)

    def last_pane(self) -> str | None:
        return self._get("window/pane", str)

    def save_pane(self, title: str, pane: QWidget) -> None:
        """Splitter positions and column widths of one pane (skipped until the pane is built)."""
        if getattr(pane, "is_placeholder", False):
            return
        from PySide6.QtWidgets import QSplitter
        key = _key(title)
        for n, splitter in enumerate(pane.findChildren(QSplitter)):
            self._set(f"{key}/splitter{n}", splitter.saveState())
        for n, header in enumerate(_headers(pane)):
            self._set(f"{key}/columns{n}", [header.sectionSize(i) for i in range(header.count())])
        choices = getattr(pane, "plot_choices", None)
        if callable(choices):  # the x and y each experiment's records are plotted with
            from spacrq.runfiles import dumps
            self._set(f"{key}/plot_choices", dumps(choices()))

    def restore_pane(self, title: str, pane: QWidget) -> None:
        from PySide6.QtWidgets import QSplitter
        key = _key(title)
        for n, splitter in enumerate(pane.findChildren(QSplitter)):
            state = self._get(f"{key}/splitter{n}", QByteArray)
            if state is not None:
                splitter.restoreState(state)
        for n, header in enumerate(_headers(pane)):
            widths = self._get(f"{key}/columns{n}", list)
            if widths:
                _apply_widths(header, widths)
        restore = getattr(pane, "restore_plot_choices", None)
        text = self._get(f"{key}/plot_choices", str)
        if callable(restore) and text:
            restore(_plot_choices(text))


def _plot_choices(text: str) -> dict[str, tuple[str, str]]:
    """``{experiment: (x, y)}`` from the settings file; anything malformed is left out."""
    from spacrq.runfiles import RunFileError, loads
    try:
        doc = loads(text, where="the remembered plot choices")
    except RunFileError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {name: (pair[0], pair[1]) for name, pair in doc.items()
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)}


def _key(title: str) -> str:
    return "pane_" + "".join(c if c.isalnum() else "_" for c in title.lower())


def _headers(pane: QWidget) -> list[QHeaderView]:
    """The column headers of a pane's tables, in the order they were made."""
    from PySide6.QtWidgets import QHeaderView
    return [h for h in pane.findChildren(QHeaderView) if h.orientation().name == "Horizontal"]


def _apply_widths(header: QHeaderView, widths: list[str]) -> None:
    """Set the remembered widths once the header has that many columns (models fill late)."""
    from PySide6.QtWidgets import QHeaderView
    try:
        sizes = [int(w) for w in widths]
    except ValueError:
        return
    if any(s < 0 or s > 10_000 for s in sizes):
        return

    def apply(*_args) -> bool:
        if header.count() != len(sizes):
            return False
        for i, size in enumerate(sizes):
            if header.sectionResizeMode(i) == QHeaderView.ResizeMode.Interactive and size > 0:
                header.resizeSection(i, size)
        return True

    if not apply():
        def once(*_args) -> None:
            if apply():
                header.sectionCountChanged.disconnect(once)
        header.sectionCountChanged.connect(once)
