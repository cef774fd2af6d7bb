"""One thing wrong, and what to do about it.

Every check spacrq makes before running anything — a job's settings, a queue's
structure, a blockwise spec, an experiment configuration — reports in this
shape, so the window lists them in one panel and the CLI prints them the same
way: severity, what is wrong in the operator's words, and the fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One problem with a job (``job_id``) or with the whole thing (``''``).

    :param job_id: the offending job, ``''`` for a queue-level problem.
    :param severity: :data:`ERROR` (must not start) or :data:`WARNING`.
    :param message: what is wrong.
    :param fix: what to do about it.
    :param setting: the settings key at fault, when there is one.
    """

    job_id: str
    severity: str
    message: str
    fix: str
    setting: str = ""

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def __str__(self) -> str:
        where = f"{self.job_id}: " if self.job_id else ""
        key = f"[{self.setting}] " if self.setting else ""
        return f"{where}{key}{self.message}\n  fix: {self.fix}"

    def to_dict(self) -> dict:
        return {"job_id": self.job_id, "severity": self.severity, "message": self.message,
                "fix": self.fix, "setting": self.setting}


def format_problems(problems: Iterable[Problem], title: str = "check") -> str:
    """Render problems errors first, then warnings, with a count line."""
    problems = list(problems)
    errors = [p for p in problems if p.is_error]
    warnings = [p for p in problems if not p.is_error]
    if not problems:
        return f"{title}: no problems found."
    lines = [f"{title}: {len(errors)} error(s), {len(warnings)} warning(s)"]
    for label, group in (("ERROR", errors), ("warning", warnings)):
        for p in group:
            lines.append(f"  {label}: {p}".replace("\n", "\n  "))
    return "\n".join(lines)
