"""Asking experiment modules what they take, beside the window's polling.

A module answers ``--manifest`` in a child process that may take seconds —
or hang until the timeout, a driver waiting for its hardware on import — so
each question is asked on a thread of its own and its answer is picked up by
a later poll as an :class:`~spacrq.watching.Outcome`.  The run table goes on
refreshing meanwhile, and closing the window kills every child still being
asked (the question is simply never answered).
"""
from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Any

from spacrq.experiments.declarations import ExperimentSpec
from spacrq.experiments.errors import MANIFEST_TIMEOUT, ExperimentError
from spacrq.experiments.environment import environment_check
from spacrq.experiments.launch import devices_for
from spacrq.experiments.manifest import ModuleNotRun, ModuleTimedOut, read_manifest, spec_environment
from spacrq.watching import Code, Outcome

__all__ = ["ManifestAsker"]


class ManifestAsker:
    """Asks modules for their manifests, one thread and one child process per question."""

    def __init__(self, timeout: float = MANIFEST_TIMEOUT) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._answers: list[Outcome] = []
        self._children: set[subprocess.Popen] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        #: declared experiment -> the manifest its module last answered (``manifest``
        #: questions; a ``probe`` of a module not declared yet is nobody's)
        self.known: dict[str, dict[str, Any]] = {}

    def ask(self, token: int, action: str, spec: ExperimentSpec) -> None:
        """Ask ``spec``'s module for its manifest; the answer comes from :meth:`answers`."""
        self._ask(token, action, spec, self._manifest_of, "manifest")

    def ask_devices(self, token: int, spec: ExperimentSpec, config: Mapping[str, Any]) -> None:
        """Ask ``spec``'s module which devices a run of ``config`` uses (``--devices``);
        the answer (``data["devices"]``: names, or ``None`` for all) comes from :meth:`answers`."""
        config = dict(config)
        self._ask(token, "devices", spec,
                  lambda spec, action: {"devices": devices_for(spec, config, on_start=self._started)},
                  "devices")

    def _ask(self, token: int, action: str, spec: ExperimentSpec,
             question: Callable[[ExperimentSpec, str], dict[str, Any]], kind: str) -> None:
        thread = threading.Thread(target=self._answer, args=(token, action, spec, question),
                                  name=f"{kind}-{spec.module}", daemon=True)
        with self._lock:
            if self._closed:
                return
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def answers(self) -> list[Outcome]:
        """The answers that came since the last call, oldest first."""
        with self._lock:
            taken, self._answers = self._answers, []
        return taken

    def busy(self) -> bool:
        with self._lock:
            return any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        """Kill every module still being asked; no answer is given after this."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        for child in children:
            _kill(child)

    # -- on the question's thread ---------------------------------------------------
    def _started(self, child: subprocess.Popen) -> None:
        with self._lock:
            closed = self._closed
            if not closed:
                self._children.add(child)
        if closed:
            _kill(child)

    def _manifest_of(self, spec: ExperimentSpec, action: str) -> dict[str, Any]:
        # the environment a run gets (bench, the module's .env, the declaration),
        # so a module that reads its settings at import answers alike
        env = spec_environment(spec)
        manifest = read_manifest(spec, env=env, timeout=self.timeout, on_start=self._started)
        if action == "manifest":  # a declared experiment's (a probe's is nobody's yet)
            with self._lock:
                self.known[spec.name] = manifest
        return {"manifest": manifest, "environment": environment_check(manifest, env)}

    def _answer(self, token: int, action: str, spec: ExperimentSpec,
                question: Callable[[ExperimentSpec, str], dict[str, Any]]) -> None:
        data: dict[str, Any] = {"experiment": spec.name, "module": spec.module}
        try:
            outcome = Outcome(token, action, Code.DONE, "", {**data, **question(spec, action)})
        except ModuleTimedOut as exc:
            outcome = Outcome(token, action, Code.TIMED_OUT, str(exc), data)
        except ModuleNotRun as exc:
            outcome = Outcome(token, action, Code.FAILED, str(exc), data)
        except ExperimentError as exc:
            outcome = Outcome(token, action, Code.INVALID, str(exc), data)
        except Exception as exc:  # an answer, never a dead thread
            outcome = Outcome(token, action, Code.FAILED, str(exc) or type(exc).__name__, data)
        finally:
            with self._lock:
                self._children = {c for c in self._children if c.poll() is None}
        with self._lock:
            if not self._closed:
                self._answers.append(outcome)


def _kill(child: subprocess.Popen) -> None:
    try:
        child.kill()
    except OSError:  # it ended on its own meanwhile
        pass
