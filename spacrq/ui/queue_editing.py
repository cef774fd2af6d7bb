"""Editing the queue document: jobs added, copied, moved, removed; files opened and saved.

A mixin of :class:`spacrq.ui.queue_pane.QueuePane`, kept apart so the pane
itself stays about layout and snapshots.  Every edit first asks
:func:`spacrq.queue.pane.edit_refusal`: while a runner owns the file the
editor refuses with a sentence instead of writing over the night's state —
except adding a job, which then goes into the file itself, under its lock,
as ``spacrq queue add`` does, and the runner takes it in.  Save applies the
pane's changes onto the file as it is now (:mod:`spacrq.queue.merge`).
Whatever reads or writes a file — checking a job about to be added (its
settings file, its paths, its module), saving, choosing a name, opening — is
asked of the watch, and its outcome comes back through the pane.
"""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from spacrq.queue.model import Job, Queue
from spacrq.queue.pane import edit_refusal, rows
from spacrq.watching import Code, Outcome


class QueueEditing:
    """The editing half of the Queue pane (needs the pane's widgets and watch)."""

    def _watch_file(self, path: Path) -> None:
        self._switch_to(Path(path), dirty=False)
        self.log.restart("", "", "Log: select a job, or run the queue to follow the running one.")
        self.problems.show_problems([], self.path.name)

    def _switch_to(self, path: Path, dirty: bool) -> None:
        """Show ``path``: an empty queue named after it until the watch has read the file."""
        self.path = path
        self.queue = Queue(name=path.name.split(".")[0])
        self.dirty = dirty
        self._on_disk = False
        self._base, self._conflicts = None, ()
        self._keeping, self._kept_failed = 0, False
        self._adopt_options_back()
        self.show_rows(())
        self.set_view(path=str(path), log_job="", reload=time.monotonic(), base=None)
        self._update_controls()

    def _adopt(self, queue: Queue, base: Queue | None) -> None:
        """Make the file's queue the document (nothing unsaved is lost: only when clean).

        ``base`` is an untouched copy of it: the next Save applies the pane's
        changes since then onto the file as it is by then
        (:mod:`spacrq.queue.merge`), so what others added meanwhile stays.
        """
        self.queue = queue
        self.dirty = self._kept_failed = False
        self._set_base(base)
        self._adopt_options_back()

    def _set_base(self, base: Queue | None) -> None:
        """What the file held when the pane last read or wrote it; the watch compares
        the file with it to say what changed on disk."""
        self._base, self._conflicts = base, ()
        self.set_view(base=base)

    def _edited(self, keep_selection: list[str] | None = None) -> None:
        """The document changed in memory: show it, mark it unsaved."""
        self.dirty = True
        self._generation += 1
        self._discard_armed = False
        self.show_rows(rows(self.queue.jobs, self.model.rows))
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

    def add_job_from_editor(self) -> int | None:
        """Check the editor's job on the watch; it joins the queue when the check passes.

        :returns: the token of the check, None when the job was refused at once.
        """
        if self._checking:
            self.show_message("info", "Still checking the last job; press Enter again once it "
                                      "is added.")
            return None
        job, problem = self.editor.job()
        if job is None:
            self.show_message("error", f"Job not added: {problem}.")
            return None
        if self.runner_alive:  # the file is the runner's: add to it as 'queue add' does
            self._checking = self.ask("add_job", path=str(self.path), job=job.to_dict())
            self.show_message("info", "Adding the job to the running queue…")
            self._update_controls()
            return self._checking
        job.id = self.queue.mint_id(job.module)
        if not job.label:
            job.label = job.default_label()
        self._checking = self.ask("check_job", job=job.to_dict(), document=self.queue.to_dict())
        self.show_message("info", f"Checking {job.id}…")
        self._update_controls()
        return self._checking

    def _keep_unsaved(self) -> None:
        """A runner started on the file while the document had unsaved edits: have the
        watch keep them (new jobs into the running queue, the rest as a copy beside it)."""
        if self._keeping or self._kept_failed or self.waiting_for("save") \
                or self.waiting_for("run"):
            return  # the pane's own save or run answers first; then it is known what is unsaved
        self._keeping = self.ask("keep_unsaved", path=str(self.path),
                                 document=self.queue.to_dict(), base=self._base)
        self.dirty = False
        self.show_message("info", f"A runner started on {self.path.name}; keeping your "
                                  "unsaved edits…")

    def _unsaved_kept(self, outcome: Outcome) -> None:
        if outcome.token != self._keeping:
            return
        self._keeping = 0
        if not outcome.data.get("kept"):
            self.dirty = self._kept_failed = True  # still the operator's, to Save once it ends
        self.show_message("warning" if outcome.ok else "error", outcome.message)

    def _job_added_to_file(self, outcome: Outcome) -> None:
        """The watch's answer about a job added to the running queue's file."""
        if outcome.token != self._checking:
            return
        self._checking = 0
        if not outcome.ok:
            self.show_message("error", outcome.message)
            return
        self.editor.clear_for_next()
        warnings = outcome.data.get("warnings") or ()
        self.show_message("warning" if warnings else "info", outcome.message + (
            f" Warnings: {'; '.join(warnings)}" if warnings else ""))

    def _job_checked(self, outcome: Outcome) -> None:
        """The watch's answer about the job being added: add it, or say why not."""
        if outcome.token != self._checking:
            return
        self._checking = 0
        problems = list(outcome.data.get("problems", ()))
        job = Job.from_dict(outcome.data["job"])
        if outcome.code is not Code.DONE:
            errors = [p for p in problems if p.is_error]
            self.problems.show_problems(problems, f"the new {job.module} job")
            more = f" ({len(errors) - 1} more below)" if len(errors) > 1 else ""
            self.show_message("error", f"Job not added: {outcome.message}{more}")
            self._update_controls()
            return
        if self.runner_alive:  # a runner started while it was checked: into its file
            job.id = ""
            self._checking = self.ask("add_job", path=str(self.path), job=job.to_dict())
            self._update_controls()
            return
        if self.queue.find(job.id) is not None:  # the document changed while it was checked
            job.id = self.queue.mint_id(job.module)
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

    def edit_selected(self) -> None:
        """Edit… the one selected job in its file (a waiting job; the watch makes the change)."""
        ids = self.selected_ids()
        job = self.queue.find(ids[0]) if len(ids) == 1 else None
        if job is None:
            self.show_message("warning", "Select one job of this queue to edit it.")
            return
        earlier = [other.id for other in self.queue.jobs[:self.queue.index(job.id)]]
        self.job_edits.open(job, earlier)

    def _row_double_clicked(self, index) -> None:
        key = self.model.key_at(self.sorting.source_row(index))
        job = self.queue.find(key) if key is not None else None
        if job is not None:
            self.editor.fill_from(job)
            self.show_message("info", f"{job.id} is in the editor: change what differs and "
                                      "press Enter to add it as a new job.")

    # -- files --------------------------------------------------------------------

    def save(self) -> bool:
        """Ask the watch to write the document; refused while a runner owns the file.

        :returns: True when the save was asked (its outcome arrives later).
        """
        if self._refused("save the queue") or self.path is None:
            return False
        token = self.ask("save", path=str(self.path), document=self.queue.to_dict(),
                         base=self._base, keep_ours=self._conflicts)
        self._saving = (token, self._generation)
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
        self._base, self._conflicts = None, ()
        self.set_view(path=str(path), log_job="", reload=time.monotonic(), base=None)
        token = self.ask("save", path=str(path), document=self.queue.to_dict(), replace=True)
        self._saving = (token, self._generation)
        self._update_controls()
        return True

    def open_queue(self, path: str | Path) -> bool:
        """Ask to show the queue in ``path`` (live, if it is running).

        Unsaved edits are not thrown away silently: the first Open says so,
        and a second Open confirms.  :returns: True when the open was asked.
        """
        if self.dirty and self.queue.jobs and not self._discard_armed:
            self._discard_armed = True
            self.show_message("warning", f"{self.queue.name} has unsaved changes: Save them, or "
                                         "Open again to discard them.")
            return False
        self._discard_armed = False
        self.ask("open", path=str(path))
        return True

    def _opened(self, outcome: Outcome) -> None:
        if not outcome.ok:
            self.show_message("error", f"Not opened: {outcome.message}")
            return
        self.runner = {}
        self.clear_message()
        self._watch_file(Path(outcome.data["path"]))

    def _new_clicked(self) -> None:
        if self.dirty and self.queue.jobs and not self._discard_armed:
            self._discard_armed = True
            self.show_message("warning", "This queue has unsaved changes: Save them, or press "
                                         "New again to discard them.")
            return
        self._discard_armed = False
        self.ask("new_name", folder=str(self.workspace.queues))

    def _named(self, outcome: Outcome) -> None:
        """A fresh name for a new queue came back: start the new, empty document."""
        self.runner = {}
        self.clear_message()
        self._switch_to(Path(outcome.data["path"]), dirty=True)

    def _open_clicked(self) -> None:
        if self.dirty and self.queue.jobs and not self._discard_armed:
            self.open_queue(self.path)  # arms the discard question, says why
            return
        path, _ = QFileDialog.getOpenFileName(self, "Open a queue", str(self.workspace.queues),
                                              "Queues (*.queue.json);;JSON files (*.json);;"
                                              "All files (*)")
        if path:
            self._discard_armed = True
            self.open_queue(path)

    def _save_as_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the queue as", str(self.workspace.queues),
                                              "Queues (*.queue.json)")
        if path:
            self.save_as(path)
