"""Running the queue from the pane: Run, Resume, Retry failed, Stop, Abort.

A mixin of :class:`spacrq.ui.queue_pane.QueuePane`.  Nothing here waits on
a process or writes a file: each button asks the watch, which saves,
checks, starts the detached runner or writes ``control.json`` on its own
thread, and answers with an :class:`~spacrq.watching.Outcome`.
The one question the pane ever asks is here: abort the running job now?
"""
from __future__ import annotations

from datetime import datetime

from spacrq.queue.pane import ending, rows
from spacrq.ui.dialogs import confirm_abort
from spacrq.watching import Code, Outcome

#: what the message line says once the runner started, per way of starting it
_STARTED = {"run": "Started", "resume": "Resumed", "retry": "Retrying failed jobs of"}


class QueueRunning:
    """The running half of the Queue pane (needs the pane's widgets and watch)."""

    def validate(self) -> int:
        """Check the whole document on the watch; the panel fills when done."""
        self._validate_token = self.ask("validate", document=self.queue.to_dict())
        self.problems.title.setText("Checking every job…")
        return self._validate_token

    def start(self, how: str = "run") -> None:
        """Run / Resume / Retry failed: the watch saves, checks, then starts the runner.

        All three happen off the GUI thread — a 2000-job save is fsync'd and
        starting the runner forks a process — and the answer comes back as an
        outcome (:meth:`_ran`).
        """
        if self._refused("start the queue again") or self.path is None:
            return
        document = None
        if self.dirty or not self._on_disk:
            document = self.queue.to_dict()
        token = self.ask("run", path=str(self.path), how=how, document=document,
                         base=self._base, keep_ours=self._conflicts)
        if document is not None:
            self._saving = (token, self._generation)
        self.show_message("info", "Checking the queue before it starts…")

    def stop(self) -> None:
        """Ask the runner to start no job after the running one."""
        if not self.runner_alive:
            return
        self._ask_runner(now=False, level="info",
                         message="Stop asked: the running job finishes, then no other starts.")

    def _ask_abort(self) -> bool:
        """The one deliberate question: killing a job loses its work in progress."""
        job = self.runner.get("current_job") or "the running job"
        return confirm_abort(
            self, "Abort the running job?",
            f"Stop {job} now? It gets SIGTERM, then SIGKILL after a grace period, and is "
            "marked not run; its partial output stays on disk.")

    def abort(self) -> None:
        """Ask the runner to stop the running job now, once the operator confirms."""
        if not self.runner_alive or not self._ask_abort():
            return
        self._ask_runner(now=True, level="warning",
                         message="Abort asked: the running job is being stopped now.")

    def _ask_runner(self, now: bool, level: str, message: str) -> None:
        """Have the watch write the stop request; show it as asked at once.

        The request is marked on the pane's copy of the runner state right
        away, so Stop is not offered twice while the watch writes it.
        """
        self.ask("stop", path=str(self.path), now=now)
        self.runner = dict(self.runner, stop="abort" if now else "after_job")
        self.show_message(level, message)
        self._update_controls()

    def _saved_or_ran(self, outcome: Outcome) -> None:
        """What became of a save, run or stop the pane asked for."""
        saved = bool(outcome.data.get("saved"))
        if saved:
            self._on_disk = True
            self._own_write = True  # the file change the watch reports next is this save
        if self._saving and self._saving[0] == outcome.token:
            saving, self._saving = self._saving, None
            if saved:
                self._took_save(outcome, edited_since=saving[1] != self._generation)
            elif outcome.data.get("conflicts"):
                self._conflicts = tuple(outcome.data["conflicts"])  # Save again keeps ours
        problems = outcome.data.get("problems")
        if problems is not None:
            self.problems.show_problems(list(problems),
                                        self.path.name if self.path else "the queue")
        if not outcome.ok:
            self.show_message("warning" if outcome.code is Code.REFUSED else "error",
                              outcome.message)
            return
        if outcome.action == "save":
            self.show_message("info", outcome.message)  # the "changed on disk" line goes
            self.notify.emit(outcome.message.split(". ")[0].rstrip("."))
        elif outcome.action == "run":
            pid = outcome.data.get("pid")
            self.runner = {"alive": True, "pid": pid, "state": "running"}
            verb = _STARTED.get(outcome.data.get("how"), "Started")
            name = self.path.name if self.path else "the queue"
            self.show_message("info", f"{verb} {name} in its own process ({pid}); closing the "
                                      "window does not stop it.")
            self.notify.emit(f"{verb} queue {self.queue.name}")

    def _took_save(self, outcome: Outcome, edited_since: bool) -> None:
        """A save (or Run's save) wrote the merged queue: it is the document now.

        Edits made while it was written stay unsaved: the next Save merges
        them against what was sent, so the jobs the save kept from disk are
        not taken for the pane's own removals.
        """
        merged, base = outcome.data.get("queue"), outcome.data.get("base")
        if edited_since:
            if outcome.data.get("sent") is not None:
                self._set_base(outcome.data["sent"])
            return
        if merged is None:
            self.dirty = self._discard_armed = False
            return
        self._adopt(merged, base)
        self._discard_armed = False
        keep = self.selected_ids()
        self.show_rows(rows(self.queue.jobs, self.model.rows))
        if keep:
            self._select_ids(keep)

    def _runner_changed(self, state: dict) -> bool:
        """Take the runner's new state; True when it just ended."""
        was_alive = self.runner_alive
        self.runner = state
        return was_alive and not self.runner_alive

    def _announce_end(self) -> None:
        """One line (and one notification) when the night's queue ends (words: the core's)."""
        said = ending(self.runner, self._progress, self.queue.name, self.queue.jobs)
        if self.path is not None:
            self.queue_ended.emit(str(self.path))
        self.notify.emit(said.notice)
        self.show_message(said.level, said.message)

    def _checked(self, problems: list) -> None:
        self.problems.show_problems(problems, self.path.name if self.path else "the queue")
        errors = [p for p in problems if p.is_error]
        if errors:
            self.show_message("error", f"{len(errors)} error(s): the queue will not start until "
                                       "they are fixed (listed below).")
        elif problems:
            self.show_message("warning", f"No errors; {len(problems)} warning(s) listed below.")
        else:
            self.show_message("info", "Every job checks out.")

    def _show_runner(self) -> None:
        r = self.runner
        if r.get("unreadable"):
            text = f"Runner: its state file cannot be read ({r['unreadable']})."
        elif self.runner_alive:
            job = r.get("current_job") or next(
                (row.key for row in self.model.rows if row.look == "running"), "between jobs")
            text = f"Runner: running ({job}) — process {r.get('pid') or '?'}"
            if r.get("host"):
                text += f" on {r['host']}"
            if r.get("problem"):  # (its record could not be read or rewritten: why, on hover)
                text += " — its state file is out of date (hover for why)"
            if r.get("stop") == "after_job":
                text += " — stop asked: no job starts after this one"
            elif r.get("stop") == "abort":
                text += " — abort asked"
        elif r.get("state"):
            text = f"Runner: {r['state']}"
            when = _local_time(r.get("finished_at")) or _local_time(r.get("heartbeat_at"))
            if when:
                text += f" at {when}"
            if r.get("state") == "crashed":
                text = ("Runner: crashed or was killed mid-run; Resume picks up where it "
                        "stopped, without rerunning finished jobs.")
        else:
            text = "Runner: not started."
        self._show(self.runner_label, "setText", text)
        self._show(self.runner_label, "setToolTip",
                   r.get("problem") if self.runner_alive and r.get("problem") else "")


def _local_time(stamp) -> str:
    """An epoch number or ISO-8601 text as the operator's local day and time, or ''."""
    try:
        if isinstance(stamp, (int, float)):
            moment = datetime.fromtimestamp(stamp)
        elif isinstance(stamp, str) and stamp:
            moment = datetime.fromisoformat(stamp).astimezone()
        else:
            return ""
    except (ValueError, OverflowError, OSError):
        return ""
    return f"{moment:%a %H:%M:%S}"
