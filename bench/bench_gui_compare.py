"""The three GUI benchmarks, before and after, side by side in one table.

Runs ``bench_gui_queue.py`` (a 2000-job queue running), ``bench_gui_experiments.py``
(20 live runs) and ``bench_gui_report.py`` (a 10-hour report) first in a BEFORE
tree — a git worktree of an older commit, ``/tmp/spacrq-before`` (made with
``git worktree add`` when it is missing) — then in this tree, one after the
other with the same settings, each in a fresh interpreter of this checkout's
virtualenv.  The before run gets ``PYTHONPATH`` and the working folder of the
before tree, and the script checks that ``spacrq`` is imported from there
(the editable install would otherwise hand it this tree's code).

Printed: one row per bench and scenario with the event loop's worst stall and
its 99th percentile before and after, and after/before ratios (below 1 is
better).  A bench that fails or prints no figures in one tree gets a row
saying so, with the end of its output; the others still run.  It asserts
nothing.

    .venv/bin/python bench/bench_gui_compare.py                 # the lead's settings
    .venv/bin/python bench/bench_gui_compare.py --tiny          # a dry run of the script itself
    .venv/bin/python bench/bench_gui_compare.py --only queue --before 0a621ec
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
BEFORE_COMMIT = "0a621ec"
BEFORE_TREE = Path("/tmp/spacrq-before")
PYTHON = HERE / ".venv" / "bin" / "python"

#: bench name -> (script, arguments for a real comparison, arguments for a dry run)
BENCHES = {
    "queue": ("bench/bench_gui_queue.py", ["--jobs", "2000", "--seconds", "15"],
              ["--jobs", "40", "--seconds", "2"]),
    "experiments": ("bench/bench_gui_experiments.py", ["--runs", "20", "--seconds", "15"],
                    ["--runs", "2", "--seconds", "2", "--history", "50"]),
    "report": ("bench/bench_gui_report.py", ["--seconds", "10"],
               ["--seconds", "2", "--reopened-blocks", "2000"]),
}


@dataclass
class Figures:
    """One scenario's stalls in one tree, or why there are none."""

    scenario: str
    max_ms: float | None = None
    p99_ms: float | None = None
    problem: str = ""


# -- reading each bench's printout ---------------------------------------------------------
_QUEUE_ROW = re.compile(r"^(?P<name>\S.*?)\s+[\d.]+\s+[\d.]+ms\s+(?P<max>[\d.]+)ms\s+(?P<p99>[\d.]+)ms")
_EXP_ROW = re.compile(r"^(?P<label>max loop stall|p99 loop stall) \(ms\)\s+(?P<idle>[\d.na]+)\s+(?P<live>[\d.na]+)")
_REOPENED = re.compile(r"^reopened (?P<blocks>[\d,]+)-block run: .*?stall max (?P<max>[\d.]+) ms, "
                       r"p99 (?P<p99>[\d.]+) ms")


def _queue(out: str) -> list[Figures]:
    rows = []
    for line in out.splitlines():
        found = _QUEUE_ROW.match(line)
        if found and not line.startswith(("model", "-")):
            rows.append(Figures(found["name"].strip(), float(found["max"]), float(found["p99"])))
    return rows


def _experiments(out: str) -> list[Figures]:
    idle, live = Figures("idle workspace"), Figures("live runs")
    for line in out.splitlines():
        found = _EXP_ROW.match(line)
        if found:
            field = "max_ms" if found["label"].startswith("max") else "p99_ms"
            setattr(idle, field, float(found["idle"]))
            setattr(live, field, float(found["live"]))
    return [f for f in (idle, live) if f.max_ms is not None]


def _report(out: str) -> list[Figures]:
    rows = []
    for line in out.splitlines():
        found = _REOPENED.match(line)
        if found:
            rows.append(Figures(f"reopened {found['blocks']} blocks", float(found["max"]),
                                float(found["p99"])))
        elif line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            for r in doc.get("results", []) if isinstance(doc, dict) else []:
                rows.append(Figures(str(r.get("name")), r.get("stall_max_ms"), r.get("stall_p99_ms")))
    return rows


READERS = {"queue": _queue, "experiments": _experiments, "report": _report}


# -- running ----------------------------------------------------------------------------------
def before_tree(commit: str, tree: Path) -> Path:
    """The worktree of ``commit`` at ``tree``, added when missing."""
    if not (tree / "spacrq" / "__init__.py").is_file():
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(tree), commit],
                       check=True, capture_output=True, text=True)
    return tree


def environment(tree: Path) -> dict[str, str]:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(tree))


def spacrq_imported_from(tree: Path) -> str:
    """Where ``import spacrq`` resolves with ``tree``'s environment (must be inside ``tree``)."""
    done = subprocess.run([str(PYTHON), "-c", "import spacrq; print(spacrq.__file__)"],
                          cwd=tree, env=environment(tree), capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


def run_bench(name: str, tree: Path, args: list[str], timeout: float) -> tuple[list[Figures], float]:
    script, _real, _tiny = BENCHES[name]
    if not (tree / script).is_file():
        return [Figures("(all)", problem=f"{script} is not in {tree}")], 0.0
    started = time.monotonic()
    try:
        done = subprocess.run([str(PYTHON), script, *args], cwd=tree, env=environment(tree),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [Figures("(all)", problem=f"did not finish in {timeout:.0f} s")], timeout
    took = time.monotonic() - started
    figures = READERS[name](done.stdout)
    if done.returncode != 0 or not figures:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        why = f"exit {done.returncode}" if done.returncode != 0 else "no figures printed"
        return [Figures("(all)", problem=f"{why}: {' | '.join(tail)[:300]}")], took
    return figures, took


# -- printing ---------------------------------------------------------------------------------
def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _ratio(after: float | None, before: float | None) -> str:
    if after is None or before is None or before <= 0:
        return "—"
    return f"{after / before:.2f}x"


def table(results: dict[str, dict[str, list[Figures]]]) -> list[str]:
    lines = [f"{'bench':<12} {'scenario':<22} {'max before':>11} {'max after':>10} {'ratio':>7} "
             f"{'p99 before':>11} {'p99 after':>10} {'ratio':>7}"]
    lines.append("-" * len(lines[0]))
    for name, trees in results.items():
        before = {f.scenario: f for f in trees.get("before", [])}
        after = {f.scenario: f for f in trees.get("after", [])}
        for scenario in list(dict.fromkeys([*before, *after])):
            b, a = before.get(scenario, Figures(scenario)), after.get(scenario, Figures(scenario))
            if scenario == "(all)" or b.problem or a.problem:
                for label, f in (("before", b), ("after", a)):
                    if f.problem:
                        lines.append(f"{name:<12} {scenario:<22} {label} FAILED: {f.problem}")
                continue
            lines.append(f"{name:<12} {scenario:<22} {_ms(b.max_ms):>11} {_ms(a.max_ms):>10} "
                         f"{_ratio(a.max_ms, b.max_ms):>7} {_ms(b.p99_ms):>11} {_ms(a.p99_ms):>10} "
                         f"{_ratio(a.p99_ms, b.p99_ms):>7}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE_COMMIT, help="the commit to compare with")
    parser.add_argument("--before-tree", type=Path, default=BEFORE_TREE)
    parser.add_argument("--tiny", action="store_true", help="tiny settings: check the script runs")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated: queue,experiments,report")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one bench run may take")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"bench_gui_compare: unknown bench {', '.join(unknown)}; choose from {', '.join(BENCHES)}",
              file=sys.stderr)
        return 2
    tree = before_tree(args.before, args.before_tree)
    where = spacrq_imported_from(tree)
    if not where.startswith(str(tree)):
        print(f"bench_gui_compare: the before run would import spacrq from {where}, not from {tree}",
              file=sys.stderr)
        return 2
    print(f"before: {args.before} in {tree} (spacrq from {where})")
    print(f"after:  this tree, {HERE}")
    results: dict[str, dict[str, list[Figures]]] = {}
    for name in names:
        settings = BENCHES[name][2] if args.tiny else BENCHES[name][1]
        results[name] = {}
        for label, root in (("before", tree), ("after", HERE)):
            figures, took = run_bench(name, root, settings, args.timeout)
            results[name][label] = figures
            print(f"  ran {name} {label} ({' '.join(settings)}) in {took:.0f} s", flush=True)
    print()
    print("\n".join(table(results)))
    print("\nstalls are the lateness of a 5 ms timer on the GUI thread; target: max stall <= 50 ms; "
          f"machine load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
