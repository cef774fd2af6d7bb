"""Jobs and queues as the operator writes them, and as spaCR wrote them first.

A queue file is a superset of spaCR's format 1 (``{"spacr_queue": 1, "name",
"created", "jobs": [...]}``): every field spaCR writes keeps its name and
meaning, so a queue written by spaCR loads here unchanged and a queue written
here still loads in spaCR (which ignores the fields it does not know).

spacrq adds, per job, ``timeout``, ``retries``, ``attempts``, ``env``,
``cwd``, ``failure_kind`` and ``process`` (the pid of the job while it runs,
so a resumed queue can stop an orphan before running the job again); per
queue, ``on_error``, ``max_consecutive_failures``, ``notify_command``,
``stopped_reason`` and ``journal_seq`` (see :mod:`spacrq.queue.store`).
"""
from __future__ import annotations

import copy
import re
import unicodedata
import shlex
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from spacrq.fmt import duration as fmt_duration  # noqa: F401 (the one duration format, re-exported)
from spacrq.problems import ERROR, Problem

QUEUE_FORMAT = 1

#: Never attempted; still runnable.
STATUS_PENDING = "pending"
#: Executing now.  Persisted, so a crash leaves evidence of where it was.
STATUS_RUNNING = "running"
#: Exited 0.  May still be *partial*: see :attr:`Job.is_partial`.
STATUS_SUCCESS = "success"
#: Ran and failed (including a timeout).
STATUS_FAILED = "failed"
#: Deliberately not run because something it depends on did not succeed.
STATUS_SKIPPED = "skipped"
#: The queue halted (stop, abort, a failure with on_error=stop) before it ran.
STATUS_NOT_RUN = "not_run"

ALL_STATUSES: tuple[str, ...] = (STATUS_PENDING, STATUS_RUNNING, STATUS_SUCCESS,
                                 STATUS_FAILED, STATUS_SKIPPED, STATUS_NOT_RUN)
#: Statuses a run or a resume picks up.
RESUMABLE_STATUSES: tuple[str, ...] = (STATUS_PENDING, STATUS_NOT_RUN)
ON_ERROR_CHOICES: tuple[str, ...] = ("continue", "stop")
DEFAULT_MAX_CONSECUTIVE_FAILURES = 3

#: Job fields the runner changes while a queue runs (the transition journal
#: carries exactly these).
RUN_FIELDS: tuple[str, ...] = ("status", "started", "finished", "exit_code", "error",
                               "log_path", "run_status", "attempts", "failure_kind",
                               "process", "overrides", "ran_with", "lost_runs")

#: Most runs a job keeps as lost (each one a runner that died mid-job), and the longest
#: text of one: a file holding more is garbage, refused in a sentence.
MAX_LOST_RUNS, MAX_LOST_TEXT = 1000, 2000



def json_kind(value: Any) -> str:
    """What a JSON value is, in the words of JSON (not Python's type names)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    kinds = ((str, "a string"), (int, "a number"), (float, "a number"), (list, "a list"),
             (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "a value")

def lost_runs_ok(value: Any) -> bool:
    """Whether ``value`` is a job's ``lost_runs``: objects with a text ``started`` (and ``why``)."""
    return isinstance(value, list) and len(value) <= MAX_LOST_RUNS and all(
        isinstance(r, Mapping) and isinstance(r.get("started"), str)
        and isinstance(r.get("why", ""), str) and len(r["started"]) <= MAX_LOST_TEXT
        and len(r.get("why", "")) <= MAX_LOST_TEXT for r in value)


_BAD_ID_CHARS = re.compile(r"[/\\\x00-\x1f\x7f]")


class QueueError(Exception):
    """The queue itself is wrong: a bad job, a bad file, a refused start.

    The message is written for the operator: what is wrong and what to do.
    """


def now_iso() -> str:
    """Current UTC time, ISO-8601 with microseconds (a 0.4 s job is not a 0 s job)."""
    return datetime.now(timezone.utc).isoformat()


def parse_iso(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    # (spacrq writes every time with its offset; one written by hand without it is read as
    # this machine's local time, so it can be compared with the others)
    try:
        return moment if moment.tzinfo is not None else moment.astimezone()
    except (ValueError, OverflowError, OSError):
        return None


def id_problem(job_id: str) -> str:
    """Why ``job_id`` cannot be a job id, or ``''`` when it can.

    Ids become log and settings file names (``NN_<id>.log``), so an id that
    could name another folder (``../x``, ``a/b``) is refused outright.
    """
    if not job_id:
        return "a job id cannot be empty"
    if _BAD_ID_CHARS.search(job_id) or ".." in job_id or job_id.startswith("."):
        return (f"job id {job_id!r} contains a path separator, '..', a leading dot or a "
                "control character; job ids become log file names")
    if job_id != job_id.strip():  # (' ' is no id to name a job by; 'a ' looks like 'a')
        return (f"job id {job_id!r} begins or ends with white space, or is nothing else; "
                "give an id of letters, digits, dashes or dots, like plate-1")
    if len(job_id) > 100:
        return f"job id {job_id[:20]!r}… is longer than 100 characters"
    hidden = next((c for c in job_id if unicodedata.category(c) in _HIDDEN_CATEGORIES), "")
    if hidden:  # a right-to-left override shows 'gol.1-dab' for 'bad-1.log': ids are read
        return (f"job id {job_id!r} contains {unicodedata.name(hidden, 'an invisible character')} "
                f"(U+{ord(hidden):04X}), which changes how the id and its log's name look "
                "without being seen")
    return ""


#: Unicode categories an id may not hold: controls, format characters (bidirectional
#: overrides, zero-width joiners and spaces), line and paragraph separators, surrogates.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _str_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (str, int, float)):
        return [str(value)]
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise QueueError(f"expected a list of strings, got {json_kind(value)}")


_TEXT_FIELDS = ("label", "status", "started", "finished", "error", "log_path", "cwd",
                "failure_kind")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(data: Mapping[str, Any], name: str, where: str) -> str:
    value = data.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise QueueError(f'{where} has "{name}": {_short(value)}; it must be text (in quotes), '
                         "or delete the field")
    return value


def _whole(data: Mapping[str, Any], name: str, where: str) -> int:
    value = data.get(name)
    if value in (None, ""):
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise QueueError(f'{where} has a "{name}" that is not a whole number '
                         f"({_short(value)}); fix it or delete the field")
    if value < 0:
        raise QueueError(f'{where} has "{name}": {value}, which is negative; give 0 or more, '
                         "or delete the field")
    return value


@dataclass
class Job:
    """One module run with its settings, and its place in the night's history.

    ``settings`` is a settings file path (CSV ``Key,Value`` or JSON) or an
    inline dict; ``overrides`` are ``key=value`` strings applied on top (a
    mapping is accepted and normalised).  ``timeout`` (seconds) stops a job
    that runs longer and fails it as ``Timeout``; ``retries`` reruns a failed
    job at most that many more times, each ``retry_delay`` seconds after the
    failure (0: at once; a share that blinked or an instrument that is busy is
    usually back a little later); ``env`` adds environment variables and
    ``cwd`` is where the job runs (``spacrq queue add`` records the directory
    it was called from, so relative paths mean what they meant then).
    """

    module: str
    settings: str | dict = ""
    id: str = ""
    label: str = ""
    overrides: list[str] | dict = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)
    status: str = STATUS_PENDING
    started: str = ""
    finished: str = ""
    exit_code: int | None = None
    error: str = ""
    log_path: str = ""
    run_status: dict | None = None
    timeout: float | None = None
    retries: int = 0
    retry_delay: float = 0.0
    attempts: int = 0
    env: dict = field(default_factory=dict)
    cwd: str = ""
    failure_kind: str = ""
    process: dict | None = None
    ran_with: dict | None = None
    #: runs whose outcome was lost with their runner (``{"started", "why"}`` each), after
    #: which the job ran again from its start: the morning report counts them
    lost_runs: list = field(default_factory=list)

    @property
    def override_args(self) -> list[str]:
        if isinstance(self.overrides, dict):
            return [f"{k}={v}" for k, v in self.overrides.items()]
        return [str(item) for item in (self.overrides or [])]

    @property
    def settings_path(self) -> str:
        return self.settings if isinstance(self.settings, str) else ""

    @property
    def duration_s(self) -> float | None:
        start, end = parse_iso(self.started), parse_iso(self.finished)
        if start is None or end is None:
            return None
        return (end - start).total_seconds()

    @property
    def elapsed_s(self) -> float | None:
        """Seconds taken; counts up while the job is running."""
        if self.duration_s is not None:
            return self.duration_s
        start = parse_iso(self.started)
        if self.status == STATUS_RUNNING and start is not None:
            return max(0.0, (datetime.now(timezone.utc) - start).total_seconds())
        return None

    @property
    def is_partial(self) -> bool:
        """Exited 0, but its own run-status stamps say items failed (344 of 384 wells)."""
        if not isinstance(self.run_status, dict):
            return False
        try:
            failed = int(self.run_status.get("n_failed", 0) or 0)
        except (TypeError, ValueError):
            failed = 0
        return failed > 0 or bool(self.run_status.get("unreadable"))

    def default_label(self) -> str:
        """A name for a job given none: a command job's program as it would be typed
        (quoted, its first few words), else its module and what it works on."""
        target = ""
        if isinstance(self.settings, dict):
            src = self.settings.get("src")
            argv = self.settings.get("argv")
            if not src and self.module == "command" and isinstance(argv, list) and argv:
                words = [_typed(str(a)) for a in argv[:4]]
                label = " ".join(words) + (" …" if len(argv) > 4 else "")
                return label if len(label) <= 80 else label[:79] + "…"
            target = str(src) if src else ""
        elif self.settings:
            target = str(self.settings).replace("\\", "/").rsplit("/", 1)[-1]
        return f"{self.module} {target}".strip()

    def to_dict(self) -> dict[str, Any]:
        """The job in spaCR's key order, spacrq's fields after them (a plain dict keeps its
        order; the runner renders this at every transition of a small queue)."""
        return {
            "id": self.id, "module": self.module, "label": self.label,
            "settings": self.settings, "overrides": self.override_args,
            "depends_on": list(self.depends_on), "status": self.status,
            "started": self.started, "finished": self.finished,
            "exit_code": self.exit_code, "error": self.error,
            "log_path": self.log_path, "run_status": self.run_status,
            "timeout": self.timeout, "retries": self.retries,
            "retry_delay": self.retry_delay,
            "attempts": self.attempts, "env": dict(self.env), "cwd": self.cwd,
            "failure_kind": self.failure_kind, "process": self.process,
            "ran_with": self.ran_with, "lost_runs": [dict(r) for r in self.lost_runs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, at: int | None = None) -> "Job":
        """Rebuild a job, tolerating a hand-edited entry (missing bookkeeping is fine).

        ``at``: the entry's place in its file (1 for the first), to name a job without an id.

        :raises QueueError: one sentence naming the job and the fix.
        """
        entry = "a job entry" if at is None else f"job entry {at}"
        if not isinstance(data, Mapping):
            raise QueueError(f"{entry} is {json_kind(data)}, not an object; each entry "
                             'of "jobs" must look like {"module": ..., "settings": ...}')
        raw_id = data.get("id")
        if raw_id is not None and not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
            raise QueueError(f'{entry} has "id": {_short(raw_id)}; a job id is text such as '
                             '"mask-1"')
        jid = "" if raw_id is None else str(raw_id)
        where = f"job {jid!r}" if jid else entry
        module = data.get("module")
        if not isinstance(module, str) or not module.strip():
            raise QueueError(f'{where} has no "module"; every job needs one, e.g. "module": "command"')
        text = {name: _text(data, name, where) for name in _TEXT_FIELDS}
        status = text["status"] or STATUS_PENDING
        if status not in ALL_STATUSES:
            raise QueueError(f"{where} has status {status!r}; use one of {', '.join(ALL_STATUSES)}")
        settings = data.get("settings") or ""
        if not isinstance(settings, (str, dict)):
            raise QueueError(f'{where} has "settings" that is {json_kind(settings)}; give a '
                             "settings file path or an object of settings")
        overrides = data.get("overrides") or []
        if isinstance(overrides, str):
            overrides = [overrides]
        if not isinstance(overrides, (list, dict)) or (
                isinstance(overrides, list) and not all(isinstance(o, str) for o in overrides)):
            raise QueueError(f'{where} has "overrides" {_short(overrides)}; write them like '
                             '"overrides": ["n_jobs=4"]')
        try:
            depends = _str_list(data.get("depends_on"))
        except QueueError:
            raise QueueError(f'{where} has a "depends_on" that is not a list of job ids; '
                             'write it like "depends_on": ["mask-1"]') from None
        timeout = data.get("timeout")
        if timeout in ("", None):
            timeout = None
        else:
            try:
                if isinstance(timeout, bool):
                    raise TypeError
                timeout = float(timeout)
                if timeout != timeout or timeout in (float("inf"), float("-inf")):
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise QueueError(f'{where} has "timeout": {_short(timeout)}; give seconds as a '
                                 "number or null for none") from None
        retries = _whole(data, "retries", where)
        delay = data.get("retry_delay")
        try:
            if isinstance(delay, (bool, str)):
                raise TypeError
            delay = 0.0 if delay is None else float(delay)
            if not 0 <= delay < float("inf"):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            raise QueueError(f'{where} has "retry_delay": {_short(delay)}; give the seconds to '
                             "wait before a retry as a number, 0 for none") from None
        attempts = _whole(data, "attempts", where)
        env = data.get("env") or {}
        if not isinstance(env, dict) or not all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in env.values()):
            raise QueueError(f'{where} has an "env" that is not an object of text values; write '
                             'it like "env": {"OMP_NUM_THREADS": "4"}')
        exit_code = data.get("exit_code")
        if exit_code is not None:
            if isinstance(exit_code, float) and exit_code.is_integer():
                exit_code = int(exit_code)
            if not isinstance(exit_code, int) or isinstance(exit_code, bool):
                raise QueueError(f'{where} has "exit_code": {_short(exit_code)}; an exit code is '
                                 "a whole number or null")
        lost = data.get("lost_runs") or []
        if not lost_runs_ok(lost):
            raise QueueError(f'{where} has "lost_runs": {_short(lost)}; it is a list of at most '
                             f'{MAX_LOST_RUNS} {{"started": ..., "why": ...}} objects of short text '
                             '(delete it if in doubt)')
        extras = {}
        for name in ("run_status", "process", "ran_with"):
            value = data.get(name)
            if value is not None and not isinstance(value, dict):
                raise QueueError(f'{where} has "{name}": {_short(value)}; it is an object or '
                                 "null (delete it if in doubt)")
            extras[name] = value
        return cls(
            module=module.strip(), settings=settings, id=jid,
            label=text["label"], overrides=overrides,
            depends_on=depends, status=status,
            started=text["started"], finished=text["finished"],
            exit_code=exit_code, error=text["error"], log_path=text["log_path"],
            run_status=extras["run_status"],
            timeout=timeout, retries=max(0, retries), retry_delay=delay,
            attempts=max(0, attempts),
            env={str(k): str(v) for k, v in env.items()}, cwd=text["cwd"],
            failure_kind=text["failure_kind"], process=extras["process"],
            ran_with=extras["ran_with"],
            lost_runs=[{"started": r["started"], "why": r.get("why", "")} for r in lost],
        )

    def reset(self, lost: str = "") -> "Job":
        """Clear the bookkeeping so the job runs again; with ``lost`` (why its outcome is
        unknown) the run it had is kept in :attr:`lost_runs`, else they are forgotten too."""
        if lost and self.started:
            self.lost_runs = [*self.lost_runs, {"started": self.started[:MAX_LOST_TEXT],
                                                "why": lost[:MAX_LOST_TEXT]}][-MAX_LOST_RUNS:]
        elif not lost:
            self.lost_runs = []
        self.status = STATUS_PENDING
        self.started = self.finished = self.error = self.failure_kind = ""
        self.exit_code = None
        self.run_status = None
        self.attempts = 0
        self.process = None
        return self

    def copy(self, **changes: Any) -> "Job":
        """A never-run copy with ``changes`` applied: the Duplicate button.

        The copy gets a fresh id when it joins a queue unless ``id`` is given.
        """
        data = dict(self.to_dict())
        data.update(changes)
        clone = Job.from_dict(data)
        clone.reset()
        clone.log_path = ""
        clone.ran_with = None
        if "id" not in changes:
            clone.id = ""
        return clone


def _typed(word: str) -> str:
    """``word`` quoted as a person would type it: in double quotes when it holds single
    quotes and nothing a shell reads inside double quotes, else as :func:`shlex.quote`."""
    quoted = shlex.quote(word)
    if quoted != word and "'" in word and not any(c in word for c in '"$`\\!'):
        return f'"{word}"'
    return quoted


def refusal_of(job: Job, errors: list[Problem]) -> str:
    """The one sentence refusing ``job``: every error with its fix."""
    return (f"job {job.id!r} cannot be added: "
            + "; ".join(f"{p.message} (fix: {p.fix})" for p in errors))


def dependency_problems(job: Job, queue: "Queue | None",
                        positions: dict[str, int] | None = None) -> list[Problem]:
    """What is wrong with the jobs ``job`` runs after: itself, unknown, or later in the queue.

    ``positions`` (job id -> index) saves recomputing it for every job of a
    large queue; a job not in the queue yet counts as being at its end.
    """
    if queue is None:
        return []
    if positions is None:
        positions = {}
        for i, other in enumerate(queue.jobs):
            positions.setdefault(other.id, i)
    jid = job.id or job.default_label()
    here = positions.get(job.id, len(queue.jobs))
    problems = []
    for dep in job.depends_on:
        if dep == job.id:
            problems.append(Problem(jid, ERROR, f"job {jid!r} depends on itself",
                                    "Remove it from its own 'after' list."))
        elif dep not in positions:
            known = ", ".join(i for i in queue.ids if i != job.id)[:300]
            problems.append(Problem(jid, ERROR, f"it runs after {dep!r}, which is not a job in "
                                    "this queue", f"Use one of: {known}." if known else
                                    f"Add {dep!r} to the queue first, or leave the dependency "
                                    "out: the queue has no other job yet."))
        elif positions[dep] > here:
            problems.append(Problem(jid, ERROR, f"it runs after {dep!r}, which comes later in "
                                    "the queue, so it would always be skipped",
                                    f"Move {dep!r} above {jid!r}, or drop the dependency."))
    return problems


@dataclass
class Queue:
    """An ordered list of jobs, run one at a time, top to bottom."""

    jobs: list[Job] = field(default_factory=list)
    created: str = field(default_factory=now_iso)
    name: str = "queue"
    on_error: str = "continue"
    max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES
    notify_command: list[str] = field(default_factory=list)
    stopped_reason: str = ""
    journal_seq: int = 0
    #: What loading the file skipped or could not do, one sentence each (never saved).
    warnings: list[str] = field(default_factory=list, compare=False, repr=False)
    #: journal lines skipped when it was read (they are kept aside when it is folded)
    journal_skipped: int = field(default=0, compare=False, repr=False)
    #: the last checkpoint the queue was read from, its file being damaged (never saved;
    #: see :mod:`spacrq.queue.lastgood`)
    recovered_from: str = field(default="", compare=False, repr=False)
    #: whether the journal read was written for another queue (never applied; kept aside
    #: when it is folded, never emptied)
    journal_foreign: bool = field(default=False, compare=False, repr=False)
    #: Whether ``created`` was read from the file (a hand-written one may not say: then it
    #: is made up at every load, and cannot tell this queue from another).
    created_in_file: bool = field(default=True, compare=False, repr=False)
    #: the copy in memory of a runner's state found when it was read, applied or not (never
    #: saved; see :mod:`spacrq.queue.memcopy`): the command that folds it removes it
    memory_copy: str = field(default="", compare=False, repr=False)
    #: copies kept for a queue file gone from its path that may be this one moved (never
    #: saved; see :func:`spacrq.queue.memcopy.take_from`): run and resume ask which it is
    kept_elsewhere: list[str] = field(default_factory=list, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self):
        return iter(self.jobs)

    @property
    def ids(self) -> list[str]:
        return [job.id for job in self.jobs]

    def find(self, job_id: str) -> Job | None:
        for job in self.jobs:
            if job.id == job_id:
                return job
        return None

    def index(self, job_id: str) -> int:
        for i, job in enumerate(self.jobs):
            if job.id == job_id:
                return i
        return -1

    def mint_id(self, module: str) -> str:
        """An unused id ``<module>-N``: short enough to type in ``--after``."""
        base = re.sub(r"[^a-z0-9_]+", "-", str(module).strip().lower()).strip("-") or "job"
        taken = set(self.ids)
        n = 1
        while f"{base}-{n}" in taken:
            n += 1
        return f"{base}-{n}"

    def add(self, job: Job, validate: bool = True) -> Job:
        """Append ``job`` with an id and a label, refusing a clash now rather than at 3 a.m.

        Checks only what the queue itself knows: the id, and (``validate``)
        that every job it runs after is earlier in this queue.  Checking the
        job's module and settings reads files; that is
        :func:`spacrq.queue.validate.add_checked`, which callers use to add
        a job the operator typed.

        :raises QueueError: every error found, each with its fix.
        """
        if not job.id:
            job.id = self.mint_id(job.module)
        else:
            bad = id_problem(job.id)
            if bad:
                raise QueueError(f"{bad}; choose an id made of letters, digits, '-' and '_'")
            if self.find(job.id) is not None:
                raise QueueError(f"a job with id {job.id!r} is already in this queue; job ids "
                                 "must be unique, so choose another with --id")
        if not job.label:
            job.label = job.default_label()
        if validate:
            errors = [p for p in dependency_problems(job, self) if p.is_error]
            if errors:
                raise QueueError(refusal_of(job, errors))
        self.jobs.append(job)
        return job

    def clone(self) -> "Queue":
        """The same queue as objects of its own: changing a job of one leaves the other's be.

        Jobs are copied one level deep (their lists and dicts are shared
        until replaced, which is how the runner's transitions and the editor
        change them), so a 2000-job queue is cloned in a few milliseconds.
        """
        twin = copy.copy(self)
        twin.jobs = [copy.copy(job) for job in self.jobs]
        twin.notify_command = list(self.notify_command)
        twin.warnings = list(self.warnings)
        return twin

    def remove(self, job_id: str) -> bool:
        """Remove ``job_id`` and drop it from every other job's ``depends_on``."""
        job = self.find(job_id)
        if job is None:
            return False
        self.jobs.remove(job)
        for other in self.jobs:
            if job_id in other.depends_on:
                other.depends_on = [d for d in other.depends_on if d != job_id]
        return True

    def move(self, job_id: str, offset: int) -> int:
        """Move ``job_id`` by ``offset`` places (negative is earlier); its new index or -1."""
        i = self.index(job_id)
        if i < 0:
            return -1
        j = max(0, min(len(self.jobs) - 1, i + int(offset)))
        if i != j:
            self.jobs.insert(j, self.jobs.pop(i))
        return j

    def reset(self) -> "Queue":
        for job in self.jobs:
            job.reset()
        self.stopped_reason = ""
        return self

    def counts(self) -> "OrderedDict[str, int]":
        out: OrderedDict[str, int] = OrderedDict((s, 0) for s in ALL_STATUSES)
        for job in self.jobs:
            out[job.status] = out.get(job.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return OrderedDict((
            ("spacr_queue", QUEUE_FORMAT), ("name", self.name), ("created", self.created),
            ("jobs", [job.to_dict() for job in self.jobs]),
            ("on_error", self.on_error),
            ("max_consecutive_failures", self.max_consecutive_failures),
            ("notify_command", list(self.notify_command)),
            ("stopped_reason", self.stopped_reason),
            ("journal_seq", self.journal_seq),
        ))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Queue":
        """Rebuild a queue from a file written here, by spaCR, or by hand.

        :raises QueueError: one sentence: what is wrong and the fix.
        """
        if not isinstance(data, Mapping):
            raise QueueError(f"a queue file must hold an object, not {json_kind(data)}; "
                             'it looks like {"spacr_queue": 1, "jobs": [...]}')
        version = data.get("spacr_queue", QUEUE_FORMAT)
        try:
            version = int(version)
        except (TypeError, ValueError):
            raise QueueError(f'"spacr_queue" must be a format number such as 1, not '
                             f"{version!r}; fix it in the file") from None
        if version > QUEUE_FORMAT:
            raise QueueError(f"this queue file is format {version} but spacrq reads format "
                             f"{QUEUE_FORMAT}; upgrade spacrq or write the queue again")
        raw_jobs = data.get("jobs") or []
        if not isinstance(raw_jobs, (list, tuple)):
            raise QueueError('"jobs" must be a list of job objects; wrap the jobs in [ ... ]')
        on_error = data.get("on_error") or "continue"
        if on_error not in ON_ERROR_CHOICES:
            raise QueueError(f'"on_error" is {on_error!r}; use "continue" or "stop"')
        mcf = data.get("max_consecutive_failures", DEFAULT_MAX_CONSECUTIVE_FAILURES)
        try:
            if isinstance(mcf, (bool, float)) and not (isinstance(mcf, float) and mcf.is_integer()):
                raise TypeError
            mcf = None if mcf is None else int(mcf)
            if mcf is not None and mcf < 0:
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            raise QueueError(f'"max_consecutive_failures" is {mcf!r}; give a whole number '
                             "(0 turns the check off)") from None
        try:
            notify = _str_list(data.get("notify_command"))
            seq = data.get("journal_seq") or 0
            if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
                raise ValueError
        except (QueueError, TypeError, ValueError):
            raise QueueError('"notify_command" must be a list of arguments and "journal_seq" a '
                             "number; fix or delete them") from None
        text = {name: _text(data, name, "the queue") for name in ("created", "name",
                                                                  "stopped_reason")}
        queue = cls(jobs=[], created=text["created"] or now_iso(),
                    name=text["name"] or "queue", on_error=on_error,
                    max_consecutive_failures=mcf, notify_command=notify,
                    stopped_reason=text["stopped_reason"], journal_seq=seq,
                    created_in_file=bool(text["created"]))
        unreadable: list[str] = []  # every job entry that cannot be read, not only the first
        for at, entry in enumerate(raw_jobs, start=1):
            try:
                job = Job.from_dict(entry, at=at)
            except QueueError as exc:
                unreadable.append(str(exc))
                continue
            if isinstance(entry, Mapping) and entry.get("id") is None:
                job.id = queue.mint_id(job.module)  # hand-written without ids: minted
                # (an id written as "" stays empty: validation refuses it)
            if not job.label:
                job.label = job.default_label()
            queue.jobs.append(job)
        if len(unreadable) == 1:
            raise QueueError(unreadable[0])
        if unreadable:
            shown = unreadable[:20]
            more = f"\n  … and {len(unreadable) - 20} more" if len(unreadable) > 20 else ""
            raise QueueError(f"{len(unreadable)} job entries cannot be read; fix each of them:\n  "
                             + "\n  ".join(shown) + more)
        return queue
