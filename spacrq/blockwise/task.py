"""A blockwise task: a volume, how to cut it, and what to do with each block.

The signature follows daisy's ``Task`` so scripts written for daisy read the
same; what spacrq adds is that the task also knows where its records live
(``tracking_path``: done marks, failures and per-block figures) and reads its
last report back with :meth:`Task.report`.
"""
from __future__ import annotations

import pickle
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from spacrq.blockwise.grid import BlockGrid
from spacrq.blockwise.report import read_last_run

__all__ = ["Task", "SAFE_ID"]

#: task ids become folder names: letters, digits, ``._-``, not starting with a dot
SAFE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")


class Task:
    """One blockwise task (see :func:`spacrq.blockwise.run_blockwise`).

    :param process_function: called with each :class:`~spacrq.blockwise.grid.Block`;
        raising (or returning ``False``) fails the block.  Either a picklable
        callable defined at module level or ``"package.module:function"``.
    :param check_function: ``check(block) -> bool``; True skips the block as done.
    :param timeout: seconds a block may take before its worker is stopped and
        the block retried.
    :param max_worker_restarts: how many crashed or stopped workers are replaced
        before the task gives up (default ``2 * num_workers + max_retries``).
    """

    def __init__(self, task_id: str, total_roi, read_roi, write_roi,
                 process_function: Callable | str, check_function: Callable | None = None,
                 read_write_conflict: bool = True, fit: str = "valid", num_workers: int = 1,
                 max_retries: int = 2, timeout: float | None = None,
                 upstream_tasks: Iterable["Task"] = (), tracking_path=None,
                 resource_tracking: bool = False, max_worker_restarts: int | None = None,
                 writes: str | None = None) -> None:
        if not isinstance(task_id, str) or not SAFE_ID.match(task_id):
            raise ValueError(f"task id {task_id!r} is not usable as a folder name; use letters, "
                             "digits, '.', '_' and '-' only")
        self.task_id = task_id
        self.grid = BlockGrid(total_roi, read_roi, write_roi, fit=fit,
                              read_write_conflict=read_write_conflict)
        if process_function is None or not (callable(process_function) or isinstance(process_function, str)):
            raise ValueError(f"task {task_id!r} needs a process_function: a callable or "
                             "'package.module:function'")
        self.process_function = process_function
        self.check_function = check_function
        self.read_write_conflict = bool(read_write_conflict)
        self.fit = fit
        if int(num_workers) < 1:
            raise ValueError(f"task {task_id!r} needs num_workers of at least 1")
        self.num_workers = int(num_workers)
        if int(max_retries) < 0:
            raise ValueError(f"task {task_id!r}: max_retries cannot be negative")
        self.max_retries = int(max_retries)
        if timeout is not None and float(timeout) <= 0:
            raise ValueError(f"task {task_id!r}: timeout must be a positive number of seconds")
        self.timeout = None if timeout is None else float(timeout)
        self.upstream_tasks = tuple(upstream_tasks)
        self.tracking_path = Path(tracking_path) if tracking_path else None
        self.resource_tracking = bool(resource_tracking)
        #: the folder this task writes, when it names one: its tracking store records it, so a
        #: store kept for another output is refused rather than taken for this output's work
        self.writes = str(writes) if writes else None
        self.max_worker_restarts = (2 * self.num_workers + self.max_retries
                                    if max_worker_restarts is None else int(max_worker_restarts))
        self._last_report = None
        self._log_dir: Path | None = None

    # -- geometry, under the names daisy scripts use -----------------------------------------------
    @property
    def total_roi(self):
        return self.grid.total_roi

    @property
    def read_roi(self):
        return self.grid.read_roi

    @property
    def write_roi(self):
        return self.grid.write_roi

    # -- where the records live ---------------------------------------------------
    def runs_path(self) -> Path | None:
        """``runs.jsonl``: in the tracking store, else beside the worker logs of the last run."""
        if self.tracking_path is not None:
            return self.tracking_path / "runs.jsonl"
        if self._log_dir is not None:
            return self._log_dir / "runs.jsonl"
        return None

    def report(self):
        """The last run's :class:`~spacrq.blockwise.report.TaskReport` (None before any run)."""
        path = self.runs_path()
        if path is not None and path.is_file():
            found = read_last_run(path)
            if found is not None:
                return found
        return self._last_report

    # -- handing the function to a worker process ----------------------------------
    def function_for_worker(self) -> tuple[Any, str | None]:
        """``(what the worker loads, script to run first or None)``.

        A function defined in the script being run (``__main__``) is found by
        the worker re-running that script as ``__mp_main__`` first, the way
        multiprocessing does it; the script needs the usual
        ``if __name__ == "__main__":`` guard.
        """
        fn = self.process_function
        if isinstance(fn, str):
            return fn, None
        try:
            payload = pickle.dumps(fn)
        except Exception as exc:
            raise ValueError(
                f"the process_function of task {self.task_id!r} cannot be sent to a worker process "
                f"({exc}); define it at module level or give it as 'package.module:function'"
            ) from None
        main_path = None
        if b"__main__" in payload:  # the function (or a partial of it) lives in the script
            main_path = getattr(sys.modules.get("__main__"), "__file__", None)
        return payload, main_path

    def resolved_function(self) -> Callable:
        """The callable itself, for running in this process (serial mode)."""
        if isinstance(self.process_function, str):
            from spacrq.modules import load_target
            return load_target(self.process_function)
        return self.process_function

    def __repr__(self) -> str:
        return f"Task({self.task_id!r}, blocks={self.grid.size}, grid={self.grid.shape})"
