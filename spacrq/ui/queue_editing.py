"""Editing the queue document: jobs added, copied, moved, removed; files opened and saved.

A mixin of :class:`spacrq.ui.queue_pane.QueuePane`, kept apart so the pane
itself stays about layout and snapshots.  Every edit first asks
:func:`spacrq.queue.pane_rules.edit_refusal`: while a runner owns the file the
editor refuses with a sentence instead of writing over the night's state.
Saving is done by the poller thread (a 2000-job save is fsync'd); the answer
comes back as an :class:`~spacrq.queue.watch_actions.ActionResult`.
"""
from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from spacrq.queue.model import Queue
from spacrq.queue.validate import validate_job
from spacrq.queue.pane_rules import edit_refusal
from spacrq.queue.watch_rows import rows_of


class QueueEditing:
    """The editing half of the Queue pane (needs the pane's widgets and poller)."""

    def _watch_file(self, path: Path) -> None:
        self._switch_to(Path(path), dirty=False)
        self.log.restart("", "")
        self.problems.show_problems([], self.path.name)

    def _new_document(self) -> None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M")
        n, path = 1, self.workspace.queues / f"queue-{stamp}.queue.json"
        while path.exists():
            n += 1
            path = self.workspace.queues / f"queue-{stamp}-{n}.queue.json"
        self._switch_to(path, dirty=True)

    def _switch_to(self, path: Path, dirty: bool) -> None:
        """Show ``path``: an empty queue named after it until the poller has read the file."""
        self.path = path
        self.queue = Queue(name=path.name.split(".")[0])
        self.dirty = dirty
        self._on_disk = False
        self._adopt_options_back()
        self.model.set_rows(())
        self.poller.request(path=str(path), log_job="", reload=time.monotonic())

    def _adopt(self, queue: Queue) -> None:
        """Make the file's queue the document (nothing unsaved is lost: only when clean)."""
        self.queue = queue
        self.dirty = False
        self._adopt_options_back()

    def _edited(self, keep_selection: list[str] | None = None) -> None:
        """The document changed in memory: show it, mark it unsaved."""
        self.dirty = True
        self._generation += 1
        self._discard_armed = False
        self.model.set_rows(rows_of(self.queue))
        if keep_selection is not None:
            self._select_ids(keep_selection)
        self._update_controls()

    def _refused(self, action: str) -> bool:
        refusal = edit_refusal(self.runner, action)
        if refusal:
            self.show_message("warning", refusal)
            return True
        return False

    # -- editing ------------------------------------------------------------------

    def add_job_from_editor(self) -> None:
        if self._refused("add a job"):
            return
        job, problem = self.editor.job()
        if job is None:
            self.show_message("error", f"Job not added: {problem}.")
            return
        job.id = self.queue.mint_id(job.module)
        if not job.label:
            job.label = job.default_label()
        problems = validate_job(job, self.queue)
        errors = [p for p in problems if p.is_error]
        if errors:
            self.problems.show_problems(problems, f"the new {job.module} job")
            self.show_message("error", f"Job not added: {errors[0].message} — {errors[0].fix}"
                              + (f" ({len(errors) - 1} more below)" if len(errors) > 1 else ""))
            return
        self.queue.add(job, validate=False)
        self._edited([job.id])
        self.editor.clear_for_next()
        if problems:
            self.problems.show_problems(problems, f"job {job.id}")
            self.show_message("warning", f"Added {job.id} with {len(problems)} warning(s), "
                                         "listed below.")
        else:
            self.show_message("info", f"Added {job.id}. Save, or Run, when the queue is ready.")

    def duplicate_selected(self) -> None:
        if self._refused("duplicate a job"):
            return
        copies = []
        for job_id in self.selected_ids():
            original = self.queue.find(job_id)
            if original is not None:
                copies.append(self.queue.add(original.copy(), validate=False).id)
        if copies:
            self._edited(copies)
            self.show_message("info", f"Added {', '.join(copies)}, a never-run copy; double-click "
                                      "a job to load it into the editor.")

    def remove_selected(self) -> None:
        if self._refused("remove a job"):
            return
        ids = self.selected_ids()
        for job_id in ids:
            self.queue.remove(job_id)
        if ids:
            self._edited([])
            self.show_message("info", f"Removed {', '.join(ids)}.")

    def move_selected(self, offset: int) -> None:
        if self._refused("reorder the queue"):
            return
        ids = self.selected_ids()
        if not ids:
            return
        order = ids if offset < 0 else list(reversed(ids))
        for job_id in order:
            self.queue.move(job_id, offset)
        self._edited(ids)

    def _options_changed(self) -> None:
        if self._refused("change the queue's failure rules"):
            self._adopt_options_back()
            return
        self.queue.on_error = self.on_error.currentData()
        self.queue.max_consecutive_failures = self.max_failures.value()
        self._edited(self.selected_ids())

    def _adopt_options_back(self) -> None:
        for widget in (self.on_error, self.max_failures):
            widget.blockSignals(True)
        self.on_error.setCurrentIndex(max(0, self.on_error.findData(self.queue.on_error)))
        self.max_failures.setValue(int(self.queue.max_consecutive_failures or 0))
        for widget in (self.on_error, self.max_failures):
            widget.blockSignals(False)

    def _row_double_clicked(self, index) -> None:
        row = self.model.row_at(index.row())
        job = self.queue.find(row.job_id) if row else None
        if job is not None:
            self.editor.fill_from(job)
            self.show_message("info", f"{job.id} is in the editor: change what differs and "
                                      "press Enter to add it as a new job.")

    # -- files --------------------------------------------------------------------

    def save(self) -> bool:
        """Ask the poller to write the document; refused while a runner owns the file.

        :returns: True when the save was asked (its outcome arrives as a snapshot).
        """
        if self._refused("save the queue") or self.path is None:
            return False
        self._token += 1
        self._saving = (self._token, self._generation)
        self.poller.request(save=(self._token, self.queue.to_dict()))
        return True

    def save_as(self, path: str | Path) -> bool:
        if self._refused("save the queue"):
            return False
        path = Path(path)
        if not path.name.endswith(".queue.json"):
            path = path.with_name(path.name.split(".")[0] + ".queue.json")
        self.path = path
        self.queue.name = path.name.split(".")[0]
        self.runner = {}
        self._token += 1
        self._saving = (self._token, self._generation)
        self.poller.request(path=str(path), log_job="", reload=time.monotonic(),
                            save=(self._token, self.queue.to_dict()))
        self._update_controls()
        return True

    def open_queue(self, path: str | Path) -> bool:
        """Show the queue in ``path`` (live, if it is running).

        Unsaved edits are not thrown away silently: the first Open says so,
        and a second Open confirms.
        """
        if self.dirty and self.queue.jobs and not self._discard_armed:
            self._discard_armed = True
            self.show_message("warning", f"{self.queue.name} has unsaved changes: Save them, or "
                                         "Open again to discard them.")
            return False
        self._discard_armed = False
        self.runner = {}
        self.clear_message()
        self._watch_file(Path(path))
        self._update_controls()
        return True

    def _new_clicked(self) -> None:
        if self.dirty and self.queue.jobs and not self._discard_armed:
            self._discard_armed = True
            self.show_message("warning", "This queue has unsaved changes: Save them, or press "
                                         "New again to discard them.")
            return
        self._discard_armed = False
        self.runner = {}
        self.clear_message()
        self._new_document()
        self._update_controls()

    def _open_clicked(self) -> None:
        if self.dirty and self.queue.jobs and not self._discard_armed:
            self.open_queue(self.path)  # arms the discard question, says why
            return
        path, _ = QFileDialog.getOpenFileName(self, "Open a queue", str(self.workspace.queues),
                                              "Queues (*.queue.json *.json);;All files (*)")
        if path:
            self._discard_armed = True
            self.open_queue(path)

    def _save_as_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the queue as", str(self.workspace.queues),
                                              "Queues (*.queue.json)")
        if path:
            self.save_as(path)
