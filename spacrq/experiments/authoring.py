"""A small base for experiment modules that do not use plesty-lib.

Declare the settings (:class:`~spacrq.experiments.fields.Field`), the steps a
configuration makes (:meth:`StepExperiment.plan`) and what one step does
(:meth:`StepExperiment.run_step`); the base writes the same run directory a
plesty-lib module writes, so the Experiments pane, ``spacrq exp`` and
plesty's own tools read it alike:

* ``plan.json`` — the frozen steps and configuration with their content hash
  (plesty-lib's hash: SHA-256 of the canonical JSON of both);
* ``journal.jsonl`` — ``run_started``, ``step_started``, ``step_completed``,
  ``step_failed``, ``step_aborted``, ``run_paused``, ``run_resumed``,
  ``report``, ``run_canceled``, ``run_aborted``, ``run_completed``;
* ``records.jsonl`` — one line per completed step, its result;
* ``progress.json`` — what the step in flight last said about itself.

It answers ``--manifest`` and ``--dry-run``, honours ``control.json`` at every
step boundary (pause, cancel, abort) and interrupts a step in flight on
abort or SIGTERM, retries a failing step a bounded number of times, and
resumes from the journal (``--resume RUN_ID``, refused when the plan
changed).  **Each step's record is written exactly once**, even when the
process is SIGKILLed mid-step: the record line is the commit, a resumed run
skips every step with a committed record whether or not ``step_completed``
followed it, and a line torn by the kill is cut off before anything is
appended after it.

.. code-block:: python

    class Scan(StepExperiment):
        module = "mylab.scan"
        title = "Line scan"
        fields = (Field("points", "int", 10, min_value=1),)

        def plan(self, config):
            return [Step(f"x{i}", {"x": i}) for i in range(config["points"])]

        def run_step(self, step, config):
            return {"x": step.params["x"], "signal": read_detector()}

    if __name__ == "__main__":
        raise SystemExit(Scan().main())
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from spacrq.experiments.errors import (CANCEL, JOURNAL_FILE, PLAN_FILE, PROGRESS_FILE,
                                       RECORDS_FILE, ExperimentError)
from spacrq.experiments.fields import ConfigProblem, Field, resolve_config
from spacrq.experiments.runs import check_run_id, new_run_id, read_config_file
from spacrq.experiments.stepcontrol import RunStopped, StepControl
from spacrq.runfiles import (RunFileError, append_jsonl, read_json, read_jsonl, refuse_link,
                             write_json, write_progress)

__all__ = ["Step", "StepExperiment", "Field", "RunOutcome", "plan_hash", "EXIT_COMPLETED",
           "EXIT_FAILED", "EXIT_BAD_INPUT", "EXIT_STOPPED"]

EXIT_COMPLETED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STOPPED = 0, 1, 2, 3


@dataclass(frozen=True)
class Step:
    """One atomic step: a stable id (resume matches by it) and its parameters."""

    id: str
    params: Mapping[str, Any] = field(default_factory=dict)
    op: str = "step"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "op": self.op, "params": dict(self.params)}


@dataclass
class RunOutcome:
    run_id: str
    state: str
    exit_code: int
    message: str = ""


def plan_hash(config: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> str:
    """plesty-lib's plan content hash, so either library can check the other's plan."""
    canonical = json.dumps({"config": dict(config), "steps": list(steps)}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


class _BadInput(Exception):
    pass


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _trim_torn_line(path: Path) -> None:
    """Cut a last line left without its newline by a killed writer.

    Appending after it would glue the next line to the fragment and lose both.
    """
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _BadInput(f"cannot open {path}: {exc.strerror or exc}; spacrq does not write "
                        "through links: replace it with a regular file") from None
    try:
        with os.fdopen(fd, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            back = min(size, 1 << 20)
            handle.seek(size - back)
            chunk = handle.read(back)
            cut = chunk.rfind(b"\n")
            keep = (size - back + cut + 1) if cut >= 0 else 0
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    except FileNotFoundError:
        return


def _load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The --config file, read by spacrq's one reader of configuration files."""
    try:
        return read_config_file(path, "configuration")
    except ExperimentError as exc:
        raise _BadInput(str(exc)) from None


class StepExperiment:
    """Base of a step-by-step experiment module (see the module docstring)."""

    #: import path run as ``python -m``; defaults to the subclass's module
    module: str = ""
    title: str = ""
    #: run id prefix; defaults to the class name in lower case
    name: str = ""
    fields: Sequence[Field] = ()
    #: attempts per step before the run fails
    max_retries: int = 3
    #: seconds between attempts
    retry_pause: float = 0.5
    #: seconds between reads of control.json while a step runs or the run is paused
    control_poll: float = 0.2

    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.run_id: str | None = None
        self.control: StepControl | None = None
        self._step: Step | None = None
        self._index = -1

    # -- what a module writes ------------------------------------------------

    def plan(self, config: Mapping[str, Any]) -> list[Step]:
        """The steps this configuration makes; must be deterministic (resume relies on it)."""
        raise NotImplementedError

    def run_step(self, step: Step, config: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Do one step and return its record (``None``: the step records nothing)."""
        raise NotImplementedError

    def setup(self, config: Mapping[str, Any]) -> None:
        """Connect what the run needs; called before the first step (again on resume)."""

    def teardown(self) -> None:
        """Leave the instruments safe; called however the run ends."""

    # -- what a step may call ------------------------------------------------

    def progress(self, done: int, total: int, detail: str = "") -> None:
        """Say how far the step in flight has got (``progress.json``; never fatal)."""
        if self.run_dir is None:
            return
        try:
            write_progress(self.run_dir / PROGRESS_FILE, {
                "step_id": self._step.id if self._step else None, "done": done, "total": total,
                "detail": detail, "at": _now()})
        except (OSError, RunFileError):
            pass

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, but wake at once when the run is aborted."""
        if self.control is not None:
            self.control.sleep(seconds)
        else:  # called outside a run (a module's own test): just wait
            time.sleep(max(0.0, seconds))

    def aborting(self) -> bool:
        """True once an abort was asked; a long step may check it and return early."""
        return self.control is not None and self.control.aborted.is_set()

    # -- the command line ----------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        """The declaration ``--manifest`` prints, in plesty-lib's document shape."""
        schema: dict[str, list[dict[str, Any]]] = {}
        for f in self.fields:
            schema.setdefault(f.group, []).append(f.to_dict())
        return {"module": self._module(), "title": self.title or type(self).__name__,
                "config": "", "run_root": "runs", "viz": None, "schema": schema,
                "environment": [], "options": [], "chooses_devices": False,
                "authoring": "spacrq"}

    def _module(self) -> str:
        mod = self.module or type(self).__module__
        if mod == "__main__":
            spec = getattr(sys.modules.get("__main__"), "__spec__", None)
            mod = (getattr(spec, "name", None) or mod).removesuffix(".__main__")
        return mod

    def _name(self) -> str:
        return self.name or type(self).__name__.lower()

    def parser(self) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog=f"python -m {self._module()}",
                                    description=f"Run {self.title or self._name()}, or resume an "
                                                "interrupted run.")
        p.add_argument("--config", "-c", help="configuration file (JSON or YAML)")
        p.add_argument("--run-root", default="runs", help="where run directories go")
        p.add_argument("--run-id", help="name this run (default <name>_<YYYYmmdd-HHMMSS>)")
        p.add_argument("--resume", "-r", metavar="RUN_ID", help="continue an interrupted run")
        p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
        p.add_argument("--manifest", action="store_true", help="print the declaration as JSON")
        return p

    def main(self, argv: Sequence[str] | None = None) -> int:
        """``python -m MODULE ...``: the exit code is 0 only for a completed run."""
        args = self.parser().parse_args(argv)
        if args.manifest:
            json.dump(self.manifest(), sys.stdout, indent=2, default=str)
            sys.stdout.write("\n")
            return 0
        try:
            given = _load_config_file(args.config) if args.config else {}
            if args.dry_run:
                config = resolve_config(self.fields, given)
                steps = [s.to_dict() for s in self.plan(config)]
                print(f"Plan: {len(steps)} step(s), content hash {plan_hash(config, steps)[:12]}…")
                for s in steps:
                    print(f"  {s['id']}: {s['op']}({s['params']})")
                return 0
        except (ConfigProblem, _BadInput) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        outcome = self.run(args.run_root, run_id=args.run_id, config=given, resume=args.resume,
                           install_signals=True)
        print(outcome.message, file=sys.stderr if outcome.exit_code else sys.stdout)
        return outcome.exit_code

    # -- the run -------------------------------------------------------------

    def run(self, run_root: str | os.PathLike, *, run_id: str | None = None,
            config: Mapping[str, Any] | None = None, resume: str | None = None,
            install_signals: bool = False) -> RunOutcome:
        """Run (or resume) in this process.

        ``install_signals`` (the command line sets it) makes SIGTERM and an
        abort interrupt a step in flight; without it an abort is noticed by
        :meth:`sleep` and at the next boundary — the mode for a caller that
        owns its signals (a test, or a demo seeded inside the window).
        """
        root = Path(run_root)
        try:
            cfg = resolve_config(self.fields, config)
            steps = self.plan(cfg)
            ids = [s.id for s in steps]
            if len(set(ids)) != len(ids):
                raise _BadInput("the plan repeats step ids; give every step its own id")
            plan = {"config": cfg, "steps": [s.to_dict() for s in steps]}
            digest = plan_hash(cfg, plan["steps"])
            if resume:
                rid = check_run_id(resume)
                refuse_link(root / rid, "run folder")
                done = self._prepare_resume(root / rid, digest)
            else:
                rid = check_run_id(run_id) if run_id else new_run_id(self._name())
                refuse_link(root / rid, "run folder")  # never a run written where a link points
                if (root / rid / JOURNAL_FILE).exists() or (root / rid / PLAN_FILE).exists():
                    raise _BadInput(f"run {rid!r} has already started; resume it or choose "
                                    "another name")
                write_json(root / rid / PLAN_FILE, {**plan, "hash": digest})
                done = set()
        except (ConfigProblem, _BadInput, ExperimentError, RunFileError) as exc:
            return RunOutcome(resume or run_id or "", "bad_input", EXIT_BAD_INPUT, f"error: {exc}")
        self.run_id, self.run_dir = rid, root / rid
        return self._execute(steps, cfg, done, bool(resume), install_signals)

    def _prepare_resume(self, run_dir: Path, digest: str) -> set[str]:
        """The steps already done: journaled as completed, or with a committed record."""
        try:
            stored = read_json(run_dir / PLAN_FILE, default=None)
        except Exception:
            stored = None
        if not isinstance(stored, dict) or not (run_dir / JOURNAL_FILE).exists():
            raise _BadInput(f"there is no started run {run_dir.name!r} in {run_dir.parent} to "
                            "resume")
        if stored.get("hash") != digest:
            raise _BadInput(f"the plan of run {run_dir.name!r} differs from the one this "
                            "configuration makes now; refusing to resume under a changed plan "
                            "(duplicate the run instead)")
        _trim_torn_line(run_dir / JOURNAL_FILE)
        _trim_torn_line(run_dir / RECORDS_FILE)
        done = {str(e["step_id"]) for e in read_jsonl(run_dir / JOURNAL_FILE)
                if isinstance(e, dict) and e.get("event") == "step_completed" and "step_id" in e}
        for line in read_jsonl(run_dir / RECORDS_FILE):
            prov = line.get("provenance") if isinstance(line, dict) else None
            if isinstance(prov, dict) and "step_id" in prov:
                done.add(str(prov["step_id"]))
        return done

    def _journal(self, event: str, **fields: Any) -> None:
        assert self.run_dir is not None
        append_jsonl(self.run_dir / JOURNAL_FILE, {"event": event, "ts": _now(), **fields})

    def _provenance(self) -> dict[str, Any]:
        try:
            from importlib.metadata import version as dist_version
            version = dist_version("spacrq")
        except Exception:
            version = ""
        return {"experiment": type(self).__name__, "module": self._module(), "name": self._name(),
                "versions": {"spacrq": version}, "python": platform.python_version(),
                "platform": sys.platform, "host": socket.gethostname(), "recorded_utc": _now()}

    def _execute(self, steps: list[Step], cfg: dict, done: set[str], resumed: bool,
                 install_signals: bool) -> RunOutcome:
        assert self.run_dir is not None
        rid = self.run_id or ""
        self._journal("run_started", run_id=rid, resumed=resumed, total_steps=len(steps),
                      already_completed=len(done & {s.id for s in steps}),
                      provenance=self._provenance(), pid=os.getpid())
        control = self.control = StepControl(self.run_dir, self._journal, self.control_poll)
        if resumed:
            control.skip_reports()
        control.start(install_signals)
        try:
            self.setup(cfg)
            for index, step in enumerate(steps):
                if step.id in done:
                    continue
                control.at_boundary(rid)
                self._run_one(step, index, cfg)
        except RunStopped as stop:
            self._journal_step_aborted()
            if stop.kind == CANCEL:
                self._journal("run_canceled", run_id=rid, reason=stop.reason)
                return RunOutcome(rid, "canceled", EXIT_STOPPED,
                                  f"Run {rid} canceled; resume with --resume {rid}.")
            self._journal("run_aborted", run_id=rid, reason=stop.reason, by=stop.by)
            return RunOutcome(rid, "aborted", EXIT_STOPPED,
                              f"Run {rid} aborted; resume with --resume {rid}.")
        except KeyboardInterrupt:
            self._journal_step_aborted()
            self._journal("run_canceled", run_id=rid, reason="interrupted")
            return RunOutcome(rid, "canceled", EXIT_STOPPED,
                              f"Run {rid} interrupted; resume with --resume {rid}.")
        except Exception as exc:
            self._journal("run_aborted", run_id=rid, error=repr(exc))
            return RunOutcome(rid, "failed", EXIT_FAILED,
                              f"Run {rid} failed: {exc!r}; fix the cause and resume with "
                              f"--resume {rid}.")
        finally:
            self._step = None
            control.close()
            self.teardown()
        self._journal("run_completed", run_id=rid)
        return RunOutcome(rid, "completed", EXIT_COMPLETED, f"Run completed: {rid} ({self.run_dir})")

    def _journal_step_aborted(self) -> None:
        if self._step is not None:
            self._journal("step_aborted", step_id=self._step.id, index=self._index)

    def _run_one(self, step: Step, index: int, cfg: dict) -> None:
        """One step with its retries; its record line is its commit."""
        assert self.run_dir is not None and self.control is not None
        self._step, self._index = step, index
        last: BaseException | None = None
        for attempt in range(1, max(1, self.max_retries) + 1):
            self._journal("step_started", step_id=step.id, op=step.op, index=index, attempt=attempt)
            try:
                with self.control.step():
                    result = self.run_step(step, cfg)
            except (RunStopped, KeyboardInterrupt):
                raise
            except Exception as exc:
                last = exc
                self._journal("step_failed", step_id=step.id, index=index, attempt=attempt,
                              error=repr(exc), traceback=traceback.format_exc(limit=8))
                if attempt < self.max_retries:
                    self.sleep(self.retry_pause)
                continue
            if result is not None:
                append_jsonl(self.run_dir / RECORDS_FILE, {
                    "index": index, "saved_at": _now(),
                    "provenance": {"step_id": step.id, "op": step.op, "params": dict(step.params)},
                    "type": "value", "value": dict(result)})
            self._journal("step_completed", step_id=step.id, index=index,
                          recorded=result is not None)
            self._step = None
            return
        assert last is not None
        raise last
