"""The morning report's charts of a blockwise run, from its tracking store's columns."""
from __future__ import annotations

from typing import Any

import numpy as np

from spacrq.night.svg import Chart, Line

#: at most this many workers get a line each; the rest are summed into "other workers"
MAX_WORKER_LINES = 8


def _finite(columns: dict[str, np.ndarray], *names: str) -> np.ndarray | None:
    arrays = [columns.get(n) for n in names]
    if any(a is None for a in arrays):
        return None
    keep = np.ones(len(arrays[0]), dtype=bool)
    for a in arrays:
        keep &= np.isfinite(a.astype(float))
    return keep


def block_charts(columns: dict[str, Any]) -> list[Chart]:
    """Compute and idle per worker, blocks per second, wall by completion order, peak RSS."""
    done = columns.get("done")
    if done is None or not np.asarray(done).any():
        why = "no block of this run was done"
        return [Chart(t, "", "", empty=why) for t in
                ("Compute and idle per worker", "Blocks per second", "Wall time per block",
                 "Peak memory per block")]
    keep = _finite(columns, "returned_at", "wall_seconds")
    if keep is None or not keep.any():
        why = "this run did not record per-block timings (resource tracking was off)"
        return [Chart(t, "", "", empty=why) for t in
                ("Compute and idle per worker", "Blocks per second", "Wall time per block",
                 "Peak memory per block")]
    keep &= np.asarray(done, dtype=bool)
    returned = columns["returned_at"][keep].astype(float)
    wall = columns["wall_seconds"][keep].astype(float)
    sent = columns.get("sent_at")
    sent = sent[keep].astype(float) if sent is not None else returned - wall
    workers = columns.get("worker_id")
    workers = workers[keep].astype(np.int64) if workers is not None else np.zeros(len(wall), int)
    rss = columns.get("peak_rss_bytes")
    rss = rss[keep].astype(float) if rss is not None else None
    order = np.argsort(returned, kind="stable")
    returned, wall, sent, workers = returned[order], wall[order], sent[order], workers[order]
    if rss is not None:
        rss = rss[order]
    start = float(np.nanmin(sent)) if np.isfinite(sent).any() else float(returned[0] - wall[0])
    return [_worker_chart(returned - start, wall, workers),
            _rate_chart(returned - start),
            _wall_chart(wall),
            _rss_chart(rss)]


def _worker_chart(t: np.ndarray, wall: np.ndarray, workers: np.ndarray) -> Chart:
    ids = np.unique(workers)
    per_block = {int(w): float(wall[workers == w].mean()) for w in ids}
    lines: list[Line] = []
    shown = ids[:MAX_WORKER_LINES]
    for colour, w in enumerate(shown):
        mask = workers == w
        tw = t[mask]
        compute = np.cumsum(wall[mask])
        idle = np.maximum(0.0, tw - compute)
        name = f"worker {int(w)}"
        lines.append(Line(f"{name} compute", tw, compute, colour=colour))
        lines.append(Line(f"{name} idle", tw, idle, colour=colour, dashed=True))
    note = ""
    if len(ids) > MAX_WORKER_LINES:
        note = (f"{len(ids) - MAX_WORKER_LINES} more workers are not drawn; "
                "the Resource Utilization table lists every worker.")
    if len(per_block) > 1:
        slowest = max(per_block, key=per_block.get)
        others = [v for k, v in per_block.items() if k != slowest]
        typical = float(np.median(others))
        if typical > 0 and per_block[slowest] > 1.5 * typical:
            note = (f"Slowest worker: worker {slowest}, {per_block[slowest] * 1000:.0f} ms of "
                    f"compute per block against {typical * 1000:.0f} ms for the others. " + note)
    return Chart("Compute and idle per worker (cumulative)", "run time (s)", "seconds",
                 tuple(lines), note=note.strip())


def _rate_chart(t: np.ndarray) -> Chart:
    span = float(t.max()) if t.size else 0.0
    bins = int(min(120, max(4, t.size // 4)))
    if span <= 0:
        return Chart("Blocks per second", "run time (s)", "blocks/s",
                     empty="every block returned at the same instant")
    counts, edges = np.histogram(t, bins=bins, range=(0.0, span))
    width = edges[1] - edges[0]
    return Chart("Blocks per second", "run time (s)", "blocks/s",
                 (Line("blocks/s", (edges[:-1] + edges[1:]) / 2, counts / width),))


def _wall_chart(wall: np.ndarray) -> Chart:
    order = np.arange(1, wall.size + 1, dtype=float)
    lines = [Line("wall per block", order, wall * 1000.0, points_only=True)]
    note = ""
    if wall.size >= 3:
        slope, intercept = _line_fit(order, wall * 1000.0)
        lines.append(Line("trend", order[[0, -1]], intercept + slope * order[[0, -1]], colour=1))
        note = f"Trend: {slope * 1000:+.3f} ms per 1000 blocks."
    return Chart("Wall time per block, in completion order", "completion order", "ms",
                 tuple(lines), note=note)


def _line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``(slope, intercept)`` in closed form (a tenth of ``polyfit``'s cost)."""
    mx, my = float(x.mean()), float(y.mean())
    dx = x - mx
    var = float(np.dot(dx, dx))
    slope = float(np.dot(dx, y - my)) / var if var else 0.0
    return slope, my - slope * mx


def _rss_chart(rss: np.ndarray | None) -> Chart:
    if rss is None or not (rss >= 0).any():
        return Chart("Peak memory per block", "", "",
                     empty="peak memory was not recorded for this run")
    ok = rss >= 0
    order = np.arange(1, rss.size + 1, dtype=float)[ok]
    return Chart("Peak memory per block, in completion order", "completion order", "MiB",
                 (Line("peak RSS", order, rss[ok] / 2**20, points_only=True),),
                 note=f"Highest: {rss[ok].max() / 2**20:.1f} MiB.")


def records_chart(rows: list[dict[str, Any]], x: str) -> Chart:
    """An experiment's records: each numeric column against the swept setpoint (or index)."""
    if not rows:
        return Chart("Records", "", "", empty="the run committed no records")
    numeric = [k for k in rows[0] if k not in (x, "index", "step_id")
               and all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)
                       for r in rows[:50] if k in r)]
    if not numeric:
        return Chart("Records", x, "", empty="the records hold no numeric column to plot")
    xs = np.asarray([_num(r.get(x)) for r in rows], float)
    lines = tuple(Line(k, xs, np.asarray([_num(r.get(k)) for r in rows], float), colour=i,
                       points_only=False) for i, k in enumerate(numeric[:4]))
    return Chart(f"Records: {', '.join(numeric[:4])} against {x}", x, "value", lines)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else float("nan")
