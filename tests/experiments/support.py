"""Helpers shared by the experiments tests."""
from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

from spacrq.experiments import ExperimentSpec


def fake_module(tmp_path: Path, body: str, name: str = "fakemod") -> ExperimentSpec:
    """A spec of a throwaway module whose ``__main__`` is ``body`` (for bad-answer tests)."""
    checkout = tmp_path / f"{name}-checkout"
    (checkout / name).mkdir(parents=True)
    (checkout / name / "__init__.py").write_text("")
    (checkout / name / "__main__.py").write_text(textwrap.dedent(body))
    return ExperimentSpec(name, name, sys.executable, str(checkout), {}, str(tmp_path / "runs"))


def until(predicate: Callable[[], object], timeout: float = 20.0, poll: float = 0.02):
    """Poll ``predicate`` until it is truthy (core tests may poll with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(poll)
