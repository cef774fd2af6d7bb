"""Files dragged onto a pane from the file manager: accepted, and handed on as local paths.

:class:`DropTarget` watches one widget (and, for a group of fields, the
fields inside it that would otherwise take the drop as text): it accepts a
drag that carries local files, and on the drop emits their paths.  What the
paths are is decided from their names (:func:`spacrq.drops.classify`);
nothing is read here, so a drop never waits on a disk.

What each pane does with them: :class:`QueueDrops` (a queue file opens, a
settings file fills the job editor, several add one job each) and
:class:`ReportDrops` (a tracking store or its runs.jsonl opens its report).
A drop a pane does not take is answered with one sentence saying what it
takes.
"""
from __future__ import annotations

from pathlib import PurePath

from PySide6.QtCore import QEvent, QMimeData, QObject, Signal
from PySide6.QtWidgets import QAbstractScrollArea, QWidget

from spacrq.drops import QUEUE, SETTINGS, STORE, classify

__all__ = ["DropTarget", "local_paths", "QueueDrops", "ReportDrops", "QUEUE_HINT",
           "REPORT_HINT"]

_DRAGS = (QEvent.Type.DragEnter, QEvent.Type.DragMove)


def local_paths(mime: QMimeData | None) -> list[str]:
    """The local files a drag carries (web links and text are not files)."""
    if mime is None or not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]


class DropTarget(QObject):
    """Makes ``widget`` take dropped files; :attr:`dropped` carries their paths.

    ``children=True`` also watches the widget's own text fields and lists,
    which take drops themselves (a line edit would paste the file's URL).
    """

    #: the local paths of one drop, in the order they were dragged
    dropped = Signal(list)

    def __init__(self, widget: QWidget, children: bool = False) -> None:
        super().__init__(widget)
        self.widget = widget
        targets = [widget]
        if children:
            targets += [w for w in widget.findChildren(QWidget) if w.acceptDrops()]
        for target in targets:
            self._watch(target)

    def _watch(self, widget: QWidget) -> None:
        if isinstance(widget, QAbstractScrollArea):  # a table: its drops land on the viewport
            widget = widget.viewport()
        widget.setAcceptDrops(True)
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        kind = event.type()
        if kind in _DRAGS or kind == QEvent.Type.Drop:
            paths = local_paths(event.mimeData())
            if not paths:
                return False  # text, a web link: the widget's own business
            event.acceptProposedAction()
            if kind == QEvent.Type.Drop:
                self.dropped.emit(paths)
            return True
        return False


# -- what each pane does with a drop -----------------------------------------------------

#: the sentence for a drop the Queue pane does not take
QUEUE_HINT = ("Drop a *.queue.json file to open it, or settings files (CSV Key,Value or "
              "JSON): one on the job editor fills its Settings, several add one job each "
              "with the editor's module.")
#: what the job editor's Settings field says about drops
_SETTINGS_TIP = ("The job's settings file (CSV Key,Value or JSON); empty = the module's "
                 "defaults. Drop a settings file here to fill it, or several on the pane to add "
                 "one job each.")
#: the sentence for a drop the Run Report does not take
REPORT_HINT = "Drop a task's tracking store folder, or its runs.jsonl, to open its report."


def _names(paths) -> str:
    shown = ", ".join(PurePath(p).name or p for p in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


class QueueDrops(QObject):
    """The Queue pane's drops: a queue file opens, settings files fill the editor or add jobs.

    ``pane`` is the Queue pane: it opens a queue (``open_queue(path)``),
    asks its watch (``ask``, answers on ``answered``), adds the editor's job
    (``add_job_from_editor() -> token | None``, checked on the watch exactly
    as the Add button's) and shows one line (``show_message(level, text)``).
    Settings are read by the watch, never here.
    """

    def __init__(self, pane, editor) -> None:
        super().__init__(pane)
        self.pane, self.editor = pane, editor
        self.on_pane = DropTarget(pane)
        self.on_editor = DropTarget(editor, children=True)
        self.on_pane.dropped.connect(lambda paths: self.take(paths, on_editor=False))
        self.on_editor.dropped.connect(lambda paths: self.take(paths, on_editor=True))
        said = editor.settings.toolTip()
        editor.settings.setToolTip((said + "\n" if said else "") + _SETTINGS_TIP)
        self._reading: int | None = None      # the token of the settings file being read
        self._adding: list[str] = []          # settings files still to add a job for
        self._checking: tuple[int, str] | None = None
        self._kept = ""                       # the editor's Settings before the drop
        self._done: list[str] = []
        self._refused: list[tuple[str, str]] = []
        pane.answered.connect(self._answered)

    @property
    def busy(self) -> bool:
        return self._reading is not None or self._checking is not None or bool(self._adding)

    def take(self, paths: list[str], on_editor: bool = False) -> None:
        """Do what ``paths`` dropped on the pane (or on its job editor) ask for."""
        drop = classify(paths)
        if len(drop.queues) == 1 and drop.only(QUEUE):
            self.pane.open_queue(drop.queues[0])
        elif drop.queues and drop.only(QUEUE):
            self.pane.show_message("warning", "Drop one queue file at a time: the pane shows "
                                              "one queue.")
        elif drop.only(SETTINGS) and self.busy:
            self.pane.show_message("info", "Still taking the last drop in; drop again once it "
                                           "is done.")
        elif drop.only(SETTINGS) and on_editor and len(drop.settings) == 1:
            self._reading = self.pane.ask("read_settings", paths=list(drop.settings))
            self.pane.show_message("info", f"Reading {_names(drop.settings)}…")
        elif drop.only(SETTINGS):
            self._add_each(list(drop.settings))
        else:
            unused = drop.unknown or drop.paths
            self.pane.show_message("warning", f"Not used: {_names(list(unused))}. {QUEUE_HINT}")

    # -- one settings file: into the editor ---------------------------------------------
    def _answered(self, outcome) -> None:
        if outcome.action == "read_settings" and outcome.token == self._reading:
            self._reading = None
            self._read(outcome)
        elif (outcome.action == "check_job" and self._checking is not None
              and outcome.token == self._checking[0]):
            path = self._checking[1]
            self._checking = None
            if outcome.ok:
                self._done.append(path)
            else:
                self._refused.append((path, outcome.message))
            self._next()

    def _read(self, outcome) -> None:
        if not outcome.ok:
            self.pane.show_message("error", f"Settings not used: {outcome.message}")
            return
        found = tuple(outcome.data.get("settings", ()))
        if not found:
            return
        path, settings = found[0]["path"], dict(found[0]["settings"])
        self.editor.settings.setText(path)
        keys = ", ".join(list(settings)[:6]) + (", …" if len(settings) > 6 else "")
        self.pane.show_message("info", f"Settings from {PurePath(path).name}: {len(settings)} "
                                       f"value(s) ({keys or 'none'}); press Enter to add the "
                                       "job.")

    # -- several: one job each ---------------------------------------------------------
    def _add_each(self, paths: list[str]) -> None:
        self._adding, self._done, self._refused = list(paths), [], []
        self._kept = self.editor.settings.text()
        self.editor.label.clear()  # each job is named after its own settings file
        self._next()

    def _next(self) -> None:
        if self._adding:
            path = self._adding.pop(0)
            self.editor.settings.setText(path)
            token = self.pane.add_job_from_editor()
            if token is not None:
                self._checking = (token, path)
                return
            self._adding = []  # refused at once (the queue runs, a field is wrong): it said why
        self.editor.settings.setText(self._kept)
        total = len(self._done) + len(self._refused)
        if self._refused:
            path, why = self._refused[0]
            self.pane.show_message("error", f"Added {len(self._done)} of {total} job(s); "
                                            f"{PurePath(path).name} was not added: {why}"
                                   + (f" ({len(self._refused) - 1} more not added)"
                                      if len(self._refused) > 1 else ""))
        elif self._done and total > 1:
            self.pane.show_message("info", f"Added {total} jobs, one per settings file. Save, "
                                           "or Run, when the queue is ready.")


class ReportDrops(QObject):
    """The Run Report's drops: a tracking store folder or its runs.jsonl opens its report.

    ``open_store(path)`` is the pane's own Open (its watch checks the path
    and says when it is not a store); anything else is :attr:`unknown`.
    """

    #: one sentence: what was dropped that the Run Report does not take, and what it takes
    unknown = Signal(str)

    def __init__(self, pane: QWidget, open_store) -> None:
        super().__init__(pane)
        self.open_store = open_store
        self.target = DropTarget(pane)
        self.target.dropped.connect(self.take)

    def take(self, paths: list[str]) -> None:
        drop = classify(paths)
        for path in drop.stores:
            self.open_store(path)
        if not drop.stores or not drop.only(STORE):
            unused = [p for p in drop.paths if p not in drop.stores]
            self.unknown.emit(f"Not opened: {_names(unused)}. {REPORT_HINT}")
