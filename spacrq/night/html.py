"""The morning report as one self-contained HTML page: the whole night, in the operator's order.

Verdict first, then what needs a person (failures grouped with their fix,
PARTIAL jobs with their counts), then the night's timeline, every job, each
blockwise run's figures and charts, each experiment's outcome, the machine,
and where every log is.  No script, no network, no external file: the page
opens in any browser, survives being mailed, and prints on A4.  The same
queue state gives the same bytes apart from the single "written at" line.
"""
from __future__ import annotations

import math
import re
import textwrap
from collections import OrderedDict
from html import escape
from typing import Iterable

from spacrq.night import svg
from spacrq.night.charts import block_charts, records_chart
from spacrq.night.collect import (ABORTED, DIED_RESUMED, RESUMED, RUN_AGAIN, STOPPED, JobFacts,
                                  Night)
from spacrq.fmt import duration
from spacrq.queue.model import parse_iso

#: outcome -> bar colour in the timeline and badge colour in the tables
OUTCOME_COLOURS = {"success": "#2e7d32", "partial": "#e69f00", "failed": "#c62828",
                   "skipped": "#757575", "not_run": "#bdbdbd", "running": "#1565c0",
                   "pending": "#bdbdbd", "lost": "#8d6e63"}

#: what to do about a failure of each kind; the job's own message says what happened
FIX_HINTS = {
    "ConfigurationError": "Fix the job's settings (Edit in the Queue pane, or the settings "
                          "file), then 'spacrq queue resume --retry-failed'.",
    "Killed": "The job was killed by a signal (often out of memory): check the machine's "
              "memory and the job's peak memory below, then retry it.",
    "Timeout": "The job ran past its timeout: raise 'timeout' for it, or find why it hung "
               "in its log.",
    "FileNotFoundError": "An input is missing: check the path in the message (a share not "
                         "mounted?), then retry the job.",
    "PermissionError": "spacrq could not read or write a path: fix its permissions, then "
                       "retry the job.",
    "MemoryError": "The job ran out of memory: give it smaller blocks or fewer workers.",
    "BlockwiseFailed": "Some blocks failed: the job's Run Report lists them; rerunning the job "
                       "redoes only those.",
    "ExperimentRunFailed": "The experiment did not complete: rerunning the job resumes it from "
                           "its last committed step.",
}
DEFAULT_HINT = "Read the end of the job's log (path below), fix the cause, then retry the job."

_CSS = """
@page { size: A4; margin: 14mm; }
body { font: 13px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       max-width: 190mm; margin: 0 auto; padding: 8px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 22px 0 6px;
border-bottom: 1px solid #ccc; } h3 { font-size: 14px; margin: 14px 0 4px; }
.verdict { font-size: 17px; font-weight: 600; padding: 8px 10px; border-radius: 4px; }
.verdict.good { background: #e8f5e9; } .verdict.bad { background: #ffebee; }
.verdict.mixed { background: #fff8e1; }
table { border-collapse: collapse; width: 100%; font-size: 12px; }
th, td { text-align: left; padding: 2px 6px; border-bottom: 1px solid #eee; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { color: #fff; border-radius: 3px; padding: 0 5px; font-size: 11px; white-space: nowrap; }
pre { font-size: 9.5px; background: #f7f7f7; padding: 6px; white-space: pre-wrap;
      overflow-wrap: anywhere; }
figure { margin: 10px 0; page-break-inside: avoid; } figcaption { font-weight: 600; }
svg text { font: 10px sans-serif; fill: #444; }
.legend span { margin-right: 12px; white-space: nowrap; font-size: 11px; }
.key { display: inline-block; width: 18px; height: 0; margin-right: 4px; vertical-align: middle; }
.note, .problem { font-size: 12px; } .problem { color: #b71c1c; }
.job { page-break-inside: avoid; } code { font-size: 11px; word-break: break-all; }
.written { color: #777; font-size: 11px; }
"""


def _badge(outcome: str) -> str:
    colour = OUTCOME_COLOURS.get(outcome, "#757575")
    label = "success (PARTIAL)" if outcome == "partial" else outcome.replace("_", " ")
    return f'<span class="badge" style="background:{colour}">{escape(label)}</span>'


def verdict(night: Night) -> tuple[str, str]:
    """``(one-line verdict, tone)``: what the operator needs to know before anything else."""
    if night.queue is None:
        return f"The queue could not be read: {night.problem}", "bad"
    counts: dict[str, int] = {}
    for facts in night.jobs:
        counts[facts.outcome] = counts.get(facts.outcome, 0) + 1
    total = len(night.jobs)
    running = counts.get("running", 0)
    parts = []
    for key, word in (("failed", "failed"), ("partial", "partial"), ("skipped", "skipped"),
                      ("not_run", "not run")):
        if counts.get(key):
            parts.append(f"{counts[key]} {word}")
    story = _story(night)
    told = (" " + story) if story else ""
    twice = [f.job.id for f in night.jobs if f.job.lost_runs]
    if twice:  # (an instrument sweep or a sample may have been used twice: say so up front)
        told += (f" {len(twice)} job(s) ran again from their start after a run lost with its "
                 f"runner ({', '.join(twice[:5])}{', …' if len(twice) > 5 else ''}).")
    final_stop = bool(night.events) and night.events[-1].kind in (STOPPED, ABORTED)
    crashed = any(e.kind == DIED_RESUMED for e in night.events) or bool(twice)
    if night.runner_died:
        return (f"The runner died with {sum(1 for f in night.jobs if f.outcome == 'not_run')} "
                "job(s) still to run and nothing has resumed the queue: 'spacrq queue resume' "
                "carries on." + (f" Before that: {story}" if story else ""), "bad")
    if running:
        head = f"Still running: {counts.get('success', 0) + counts.get('partial', 0)} of {total} jobs done"
        return head + (f"; {', '.join(parts)}" if parts else "") + "." + told, "mixed"
    if not parts:
        return (f"All good: every one of the {total} jobs completed and nothing is partial."
                + told, "mixed" if crashed else "good")
    short = sum(counts.get(k, 0) for k in ("failed", "partial", "skipped", "not_run"))
    head = f"{total - short} of {total} jobs fully succeeded; " + ", ".join(parts) + "."
    tone = "bad" if counts.get("failed") or final_stop else "mixed"
    return head + told, tone


def _story(night: Night) -> str:
    """What happened to the night's runners, one short sentence each, in the order it came.

    So a report read in the morning tells a crash, the operator's stop and the
    resume after it as they happened, the stop still there once the queue
    was resumed and finished.
    """
    sentences = []
    for e in night.events:
        when = f" at {_clock_time(e.at)}" if e.at else ""
        if e.kind == DIED_RESUMED:
            sentences.append(f"The runner died and the queue was resumed{when}.")
        elif e.kind in (STOPPED, ABORTED):
            word = "Stopped" if e.kind == STOPPED else "Aborted"
            if e.reason:
                sentences.append(f"{word}{when}: {e.reason}.")
            else:
                after = f" after job {e.after_job}" if e.after_job and e.kind == STOPPED else ""
                sentences.append(f"{word}{when}{after}.")
        elif e.kind == RESUMED:
            sentences.append(f"Resumed{when}.")
        elif e.kind == RUN_AGAIN:
            sentences.append(f"Run again{when}.")
    return " ".join(sentences)


def _grouped_failures(night: Night) -> "OrderedDict[str, OrderedDict[str, list[JobFacts]]]":
    groups: OrderedDict[str, OrderedDict[str, list[JobFacts]]] = OrderedDict()
    for facts in night.jobs:
        if facts.outcome != "failed":
            continue
        job = facts.job
        kind = job.failure_kind or "JobFailure"
        message = job.error.split(" (exit code")[0].split(" (log ")[0] or "no message recorded"
        groups.setdefault(kind, OrderedDict()).setdefault(message, []).append(facts)
    return groups


def _failures(night: Night) -> Iterable[str]:
    groups = _grouped_failures(night)
    if not groups:
        return
    yield "<h2>Failures, grouped</h2>"
    yield ("<p class=\"note\">Identical failures are one problem, not many: fix the cause once "
           "and retry them together ('spacrq queue resume --retry-failed').</p>")
    for kind, messages in groups.items():
        n = sum(len(v) for v in messages.values())
        yield f"<h3>{escape(kind)} ×{n}</h3><p>{escape(FIX_HINTS.get(kind, DEFAULT_HINT))}</p><ul>"
        for message, jobs in messages.items():
            ids = ", ".join(escape(f.job.id) for f in jobs)
            yield f"<li>{escape(message)} <span class=\"note\">({ids})</span></li>"
        yield "</ul>"
    skipped = [f for f in night.jobs if f.outcome == "skipped"]
    if skipped:
        yield "<h3>Skipped because of them</h3><ul>"
        for f in skipped:
            yield f"<li>{escape(f.job.id)}: {escape(f.job.error or 'its dependency did not succeed')}</li>"
        yield "</ul>"


def _partial(night: Night) -> Iterable[str]:
    partial = [f for f in night.jobs if f.outcome == "partial"]
    if not partial:
        return
    yield "<h2>PARTIAL: exited 0, but items failed</h2>"
    yield ("<p class=\"note\">Anything computed from these jobs' results covers a subset.</p>"
           "<table><tr><th>job</th><th class=\"num\">succeeded</th><th class=\"num\">attempted"
           "</th><th class=\"num\">failed</th><th>artifacts</th></tr>")
    for f in partial:
        rs = f.job.run_status or {}
        arts = ", ".join(str(a) for a in (rs.get("artifacts") or [])) or "—"
        yield (f"<tr><td>{escape(f.job.id)}</td><td class=\"num\">{escape(str(rs.get('n_succeeded', '?')))}"
               f"</td><td class=\"num\">{escape(str(rs.get('n_attempted', '?')))}</td>"
               f"<td class=\"num\">{escape(str(rs.get('n_failed', '?')))}</td>"
               f"<td><code>{escape(arts)}</code></td></tr>")
    yield "</table>"


def _timeline(night: Night) -> Iterable[str]:
    bars = []
    turns = sorted(t.timestamp() for t, _, _ in _marks(night))
    for f in night.jobs:
        t0, t1 = parse_iso(f.job.started), parse_iso(f.job.finished)
        bars.extend(_lost_bars(f.job, turns, t0))
        if t0 is None:
            continue
        end = t1 or t0
        mark = f"attempt {f.job.attempts}" if (f.job.attempts or 0) > 1 else ""
        bars.append((f.job.id, t0.timestamp(), end.timestamp(), f.outcome, mark))
    yield "<h2>Timeline</h2>"
    if not bars:
        yield '<p class="note">No job has started yet.</p>'
        return
    start = min(b[1] for b in bars)
    end = max(b[2] for b in bars)
    marks = [(t.timestamp(), label, colour) for t, label, colour in _marks(night)]
    if marks:  # a rerun job may start after the resume: the night spans both
        start = min(start, *(m[0] for m in marks))
        end = max(end, *(m[0] for m in marks))
    yield svg.timeline(bars, start=start, end=end, colours=OUTCOME_COLOURS, marks=marks)


def _lost_bars(job, turns: list[float], rerun) -> list[tuple]:
    """A bar for each run of ``job`` lost with its runner: from its start to the next turn
    of the night after it (the runner that died was followed by one), else to the job's
    next start — when it ended nobody knows."""
    out = []
    for run in job.lost_runs:
        t0 = parse_iso(run.get("started", ""))
        if t0 is None:
            continue
        begin = t0.timestamp()
        after = [t for t in turns if t > begin]
        end = after[0] if after else (rerun.timestamp() if rerun is not None else begin)
        out.append((f"{job.id} (lost)", begin, max(begin, end), "lost", "outcome lost"))
    return out


#: how each runner turn of the night is marked on the timeline: (label, colour)
MARKS = {DIED_RESUMED: ("died, resumed", "#c62828"), STOPPED: ("stopped", "#e69f00"),
         ABORTED: ("aborted", "#c62828"), RESUMED: ("resumed", "#1565c0"),
         RUN_AGAIN: ("run again", "#616161")}


def _marks(night: Night) -> list[tuple]:
    """``(time, label, colour)`` of each runner turn that has a time, in order."""
    out = []
    for e in night.events:
        when = parse_iso(e.at) if e.at else None
        if when is not None:
            out.append((when, *MARKS[e.kind]))
    return out


def _clock_time(text: str) -> str:
    """``12-01 09:04:28`` in the machine's local time: short enough for a table cell."""
    when = parse_iso(text)
    if when is None:
        return "—"
    return when.astimezone().strftime("%m-%d %H:%M:%S")


def _size(value: int | None) -> str:
    if value is None:
        return "—"
    return f"{value / 2**20:.1f} MiB" if value < 2**30 else f"{value / 2**30:.2f} GiB"


def _peak(f: JobFacts) -> str:
    """The job's peak memory; ``≤ 14.3 MiB`` when only its upper bound is known (rounded up)."""
    if f.peak_rss_bytes is not None or f.peak_rss_at_most_bytes is None:
        return _size(f.peak_rss_bytes)
    bound = f.peak_rss_at_most_bytes
    if bound < 2**30:
        return f"≤ {math.ceil(bound / 2**20 * 10) / 10:.1f} MiB"
    return f"≤ {math.ceil(bound / 2**30 * 100) / 100:.2f} GiB"


def _tries(job) -> str:
    """The job's attempts, and the runs it lost with a runner (``1 + 1 lost``)."""
    lost = len(job.lost_runs)
    return f"{job.attempts or 0} + {lost} lost" if lost else str(job.attempts or 0)


#: under the jobs table when a job lost a run with its runner
LOST_NOTE = ("lost: a run whose runner died while it ran, and whose end nobody recorded (no "
             "exit record: its supervisor died too, or the machine); its outcome is unknown, so "
             "the job ran again from its start. Its log says so where the new run begins.")

#: under the jobs table when a job's peak memory is only bounded
AT_MOST_NOTE = ("≤: the kernel counts into a job's figure the memory of the supervisor that "
                "started it; a job not clearly above that is known only to have peaked at most "
                "this high.")


def _jobs_table(night: Night) -> Iterable[str]:
    yield ("<h2>Every job</h2><table><tr><th class=\"num\">#</th><th>job</th><th>module</th>"
           "<th>outcome</th><th>started</th><th class=\"num\">took</th><th class=\"num\">tries</th>"
           "<th class=\"num\">peak memory</th></tr>")
    for f in night.jobs:
        job = f.job
        yield (f"<tr><td class=\"num\">{f.index}</td><td>{escape(job.id)}"
               + (f"<br><span class=\"note\">{escape(job.label)}</span>" if job.label and job.label != job.id else "")
               + f"</td><td>{escape(job.module)}</td><td>{_badge(f.outcome)}</td>"
               f"<td>{escape(_clock_time(job.started))}</td>"
               f"<td class=\"num\">{escape(duration(job.duration_s))}</td>"
               f"<td class=\"num\">{_tries(job)}</td>"
               f"<td class=\"num\">{escape(_peak(f))}</td></tr>")
    yield "</table>"
    if any(f.job.lost_runs for f in night.jobs):
        yield f'<p class="note">{escape(LOST_NOTE)}</p>'
    if any(f.peak_rss_bytes is None and f.peak_rss_at_most_bytes is not None for f in night.jobs):
        yield f'<p class="note">{escape(AT_MOST_NOTE)}</p>'



def _part_head(f: JobFacts, what: str, where: str, problem: str) -> Iterable[str]:
    """A job's section: its name and outcome, where its run lives, what could not be read."""
    yield f'<div class="job"><h3>{escape(f.job.id)} {_badge(f.outcome)}</h3>'
    if where:
        yield f"<p>{what} <code>{escape(where)}</code></p>"
    if problem:
        yield f'<p class="problem">This run could not be fully read: {escape(problem)}</p>'


#: columns of the Run Report's text panel on the page: its tables fit; a longer line (the
#: panel's ``note``) is wrapped under its own text, never cut behind a scrollbar or in print
PANEL_COLUMNS = 100
_LABELLED = re.compile(r"^(\s*\S+(?: \S+)?\s{2,})\S")


def _wrapped(panel: str, width: int = PANEL_COLUMNS) -> str:
    """The panel with each line longer than ``width`` wrapped, its continuation lines aligned
    under the line's own text (after its label: ``note        blocks waited…``)."""
    out = []
    for line in panel.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        label = _LABELLED.match(line)
        indent = " " * (len(label.group(1)) if label else len(line) - len(line.lstrip()))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=True,
                                 break_on_hyphens=False, drop_whitespace=True) or [line])
    return "\n".join(out)


def _blockwise(night: Night) -> Iterable[str]:
    parts = [f for f in night.jobs if f.blockwise is not None]
    if not parts:
        return
    yield "<h2>Blockwise runs</h2>"
    for f in parts:
        bw = f.blockwise
        yield from _part_head(f, "Tracking store", bw.store, bw.problem)
        if bw.panel:
            yield f"<pre>{escape(_wrapped(bw.panel))}</pre>"
        if bw.series:
            for n, chart in enumerate(block_charts(bw.series)):
                yield svg.render(chart, f"b{f.index}-{n}")
        yield "</div>"


def _experiments(night: Night) -> Iterable[str]:
    parts = [f for f in night.jobs if f.experiment is not None]
    if not parts:
        return
    yield "<h2>Experiments</h2>"
    for f in parts:
        ex = f.experiment
        yield from _part_head(f, "Run", ex.run_dir, ex.problem)
        if ex.state:
            total = ex.total if ex.total is not None else "?"
            yield (f"<p>Ended <b>{escape(ex.state)}</b> after {ex.completed} of "
                   f"{escape(str(total))} steps" + (f": {escape(ex.reason)}" if ex.reason else "")
                   + ".</p>")
        if ex.notes:
            yield "<ul>" + "".join(f"<li>{escape(n.get('at', ''))} {escape(n.get('by', ''))}: "
                                   f"{escape(n.get('text', ''))}</li>" for n in ex.notes) + "</ul>"
        if ex.state or ex.records:
            yield svg.render(records_chart(ex.records, ex.x_column or "index"), f"e{f.index}")
        yield "</div>"


def _machine(night: Night) -> Iterable[str]:
    if not night.machine:
        return
    yield "<h2>The machine</h2><table>"
    for key, value in night.machine.items():
        yield f"<tr><th>{escape(key)}</th><td>{escape(value)}</td></tr>"
    yield "</table>"


def _logs(night: Night) -> Iterable[str]:
    yield "<h2>Where the logs are</h2><table>"
    if night.runner_log:
        yield f"<tr><th>queue runner</th><td><code>{escape(night.runner_log)}</code></td></tr>"
    for f in night.jobs:
        if not f.job.log_path:
            continue
        missing = "" if f.log_readable else ' <span class="problem">(cannot be read)</span>'
        yield (f"<tr><th>{escape(f.job.id)}</th><td><code>{escape(f.job.log_path)}</code>"
               f"{missing}</td></tr>")
    yield "</table>"


def render(night: Night, *, written_at: str) -> str:
    """The whole page.  ``written_at`` is the only line that differs between two writes."""
    text, tone = verdict(night)
    name = night.queue.name if night.queue is not None else night.queue_path.name
    body: list[str] = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Morning report: {escape(name)}</title>", f"<style>{_CSS}</style></head><body>",
        f"<h1>Morning report: {escape(name)}</h1>",
        f"<p>Queue file <code>{escape(str(night.queue_path))}</code></p>",
        f'<p class="verdict {tone}" id="verdict">{escape(text)}</p>',
    ]
    if night.queue is not None:
        for section in (_failures, _partial, _timeline, _jobs_table, _blockwise, _experiments,
                        _machine, _logs):
            body.extend(section(night))
    else:
        body.extend(_machine(night))
    body.append(f'<p class="written">written at {escape(written_at)} by spacrq</p>')
    body.append("</body></html>")
    return "\n".join(body) + "\n"
