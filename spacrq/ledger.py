"""Per-item accounting for a module, stamped beside what it produced.

A measure run that processed 344 of 384 wells exits 0.  Without a record of
the 40 it lost, the queue would call it a success and everything computed
from it downstream would look real.  A module records each item it attempts
(``with ledger.item(well): ...`` or :meth:`Ledger.succeeded` /
:meth:`Ledger.failed`) and stamps its artifact; the stamp is
``<artifact stem>.run_status.json`` in spaCR's own format (a JSON list, one
record per run, appended), so spaCR's ``read_run_status`` reads spacrq's
stamps and spacrq's queue reads spaCR's — and a job whose fresh stamps
record failures is reported PARTIAL.

SQLite artifacts (``.db``, ``.sqlite``, ``.sqlite3``) carry their stamps in a
``run_status`` table, as spaCR writes them; they are read here too.
"""
from __future__ import annotations

import json
import sqlite3
import time
import traceback
import uuid
from collections import Counter, OrderedDict
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from spacrq.runfiles import RunFileError, loads, write_json

RUN_STATUS_SUFFIX = ".run_status.json"
RUN_STATUS_TABLE = "run_status"
DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_COLUMNS = ("run_id", "name", "status", "n_attempted", "n_succeeded", "n_failed",
            "failure_rate", "started_utc", "stamped_utc", "failures_json", "summary")

__all__ = ["Ledger", "RunStatusUnreadable", "read_run_status", "sidecar_path",
           "RUN_STATUS_SUFFIX", "DB_SUFFIXES"]


class RunStatusUnreadable(RuntimeError):
    """A stamp exists but cannot be read: evidence of an interrupted writer, not of success."""


def _utcnow() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def sidecar_path(artifact: str | Path) -> Path:
    """``<stem>.run_status.json`` beside ``artifact`` (spaCR's naming)."""
    target = Path(artifact)
    if target.name.endswith(RUN_STATUS_SUFFIX):
        return target
    return target.parent / (target.stem + RUN_STATUS_SUFFIX)


class Ledger:
    """What one run attempted, what failed and why, ready to stamp."""

    def __init__(self, name: str = "run") -> None:
        self.name = str(name)
        self.run_id = uuid.uuid4().hex[:12]
        self.started_utc = _utcnow()
        self.failures: list[dict[str, Any]] = []
        self.n_succeeded = 0
        self._by_stage: Counter = Counter()
        self.stamped: list[Path] = []

    @property
    def n_failed(self) -> int:
        return len(self.failures)

    @property
    def n_attempted(self) -> int:
        return self.n_succeeded + self.n_failed

    @property
    def status(self) -> str:
        """``'complete'``, ``'partial'`` or ``'empty'`` — spaCR's words."""
        if not self.n_attempted:
            return "empty"
        return "partial" if self.failures else "complete"

    def succeeded(self, item: str, stage: str = "") -> None:
        self.n_succeeded += 1
        self._by_stage[stage or self.name] += 1

    def failed(self, item: str, exc: BaseException | str, stage: str = "") -> None:
        if isinstance(exc, BaseException):
            exc_type, message = type(exc).__name__, str(exc)
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        else:
            exc_type, message, tb = "Failure", str(exc), ""
        self.failures.append({"item": str(item), "stage": stage or self.name,
                              "exc_type": exc_type, "message": message,
                              "traceback_str": tb, "timestamp": time.time()})

    @contextmanager
    def item(self, item: str, stage: str = "") -> Iterator["Ledger"]:
        """Record the block as one item: a raise is a failure, recorded and swallowed.

        One bad well must cost one well, not the plate.
        """
        try:
            yield self
        except Exception as exc:
            self.failed(item, exc, stage)
        else:
            self.succeeded(item, stage)

    def summary(self) -> str:
        if not self.failures:
            return f"{self.name}: {self.n_succeeded} of {self.n_attempted} items succeeded"
        groups: OrderedDict[str, list[dict]] = OrderedDict()
        for f in self.failures:
            groups.setdefault(f["exc_type"], []).append(f)
        lines = [f"{self.name}: RUN INCOMPLETE — {self.n_failed} of {self.n_attempted} items "
                 "failed; artifacts cover a subset"]
        for kind, group in groups.items():
            lines.append(f"  {kind} x{len(group)}")
            lines.extend(f"    {f['item']}: {f['message']}" for f in group[:20])
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """One stamp record, field for field as spaCR's ``RunLedger.to_dict``."""
        attempted = self.n_attempted
        return {
            "run_id": self.run_id, "name": self.name, "status": self.status,
            "n_attempted": attempted, "n_succeeded": self.n_succeeded,
            "n_failed": self.n_failed,
            "failure_rate": (self.n_failed / attempted) if attempted else 0.0,
            "started_utc": self.started_utc, "stamped_utc": _utcnow(),
            "success_by_stage": dict(self._by_stage), "failures": list(self.failures),
            "summary": self.summary(),
        }

    def stamp(self, artifact: str | Path) -> Path:
        """Append this run's record to the artifact's stamp; the path written.

        The sidecar is replaced atomically: a stamp torn by a crash would read
        as "interrupted" forever after.
        """
        target = Path(artifact)
        if target.suffix.lower() in DB_SUFFIXES:
            return self._stamp_db(target)
        return self.stamp_file(sidecar_path(target))

    def stamp_file(self, sidecar: str | Path) -> Path:
        """Append this run's record to the stamp file ``sidecar`` itself."""
        sidecar = Path(sidecar)
        records: list[Any] = []
        if sidecar.is_file():
            try:
                existing = loads(sidecar.read_bytes(), where=sidecar)
                records = existing if isinstance(existing, list) else [existing]
            except (OSError, RunFileError):
                records = []
        records.append(self.to_dict())
        write_json(sidecar, records)
        self.stamped.append(sidecar)
        return sidecar

    def _stamp_db(self, db: Path) -> Path:
        d = self.to_dict()
        conn = sqlite3.connect(str(db), timeout=30)
        try:
            with conn:
                conn.execute(f"CREATE TABLE IF NOT EXISTS {RUN_STATUS_TABLE} (run_id TEXT, "
                             "name TEXT, status TEXT, n_attempted INTEGER, n_succeeded INTEGER, "
                             "n_failed INTEGER, failure_rate REAL, started_utc TEXT, "
                             "stamped_utc TEXT, failures_json TEXT, summary TEXT)")
                conn.execute(f"INSERT INTO {RUN_STATUS_TABLE} VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (d["run_id"], d["name"], d["status"], d["n_attempted"],
                              d["n_succeeded"], d["n_failed"], d["failure_rate"],
                              d["started_utc"], d["stamped_utc"], json.dumps(d["failures"]),
                              d["summary"]))
        finally:
            conn.close()
        self.stamped.append(db)
        return db


def read_run_status(artifact: str | Path) -> list[dict[str, Any]]:
    """Every stamp recorded for ``artifact``, oldest first; ``[]`` when never stamped.

    :raises RunStatusUnreadable: the stamp exists but cannot be read.
    """
    target = Path(artifact)
    if target.suffix.lower() in DB_SUFFIXES:
        if not target.is_file():
            return []
        try:
            conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, timeout=5)
            try:
                row = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                                   "name=?", (RUN_STATUS_TABLE,)).fetchone()
                if row is None:
                    return []
                rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM {RUN_STATUS_TABLE} "
                                    "ORDER BY rowid").fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise RunStatusUnreadable(f"{target} exists but its run status cannot be read "
                                      f"({exc}); the run writing it may not have finished") from None
        out = []
        for row in rows:
            record = dict(zip(_COLUMNS, row))
            try:
                record["failures"] = json.loads(record.pop("failures_json") or "[]")
            except (ValueError, RecursionError):
                record["failures"] = []
            out.append(record)
        return out
    sidecar = sidecar_path(target)
    if not sidecar.is_file():
        return []
    try:
        payload = loads(sidecar.read_bytes(), where=sidecar)
    except (OSError, RunFileError) as exc:
        raise RunStatusUnreadable(f"{sidecar} exists but cannot be read ({exc}); the run "
                                  "writing it did not finish") from None
    if isinstance(payload, list):
        return [r for r in payload if isinstance(r, dict)]
    return [payload] if isinstance(payload, dict) else []
