"""Charts as inline SVG text: the morning report's pictures, with no network and no Qt.

A report mailed to the PI must open in any browser and print on A4, so each
chart is a few hundred bytes of plain SVG drawn here rather than an image
made by a plotting library.  Numbers are written with a fixed precision, so
the same data always gives the same bytes (the report is reproducible).
Long series are thinned to :data:`MAX_POINTS` per line, keeping each bin's
extremes, so a million-block run charts as quickly (and as small) as a short one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

import numpy as np

#: points drawn per line at most; more are thinned to bins' minimum and maximum
MAX_POINTS = 600
#: one colour per series, cycled: the Okabe-Ito palette (readable by colour-blind readers)
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")

WIDTH, HEIGHT = 640, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 28, 40
#: the right margin of a chart with a right-hand scale: room for its ticks and its label
_RIGHT2 = 56


@dataclass(frozen=True)
class Line:
    """One series of a chart: its name, points, colour index and style."""

    name: str
    x: np.ndarray
    y: np.ndarray
    colour: int = 0
    dashed: bool = False
    points_only: bool = False
    #: drawn against the chart's right-hand scale (``Chart.y2_label``): a series a few per
    #: cent of the others (idle beside compute) would be a flat line on theirs
    right: bool = False


@dataclass(frozen=True)
class Chart:
    """A titled chart of lines over shared axes; ``empty`` says in words why nothing is drawn."""

    title: str
    x_label: str
    y_label: str
    lines: tuple[Line, ...] = ()
    empty: str = ""
    note: str = ""
    legend: bool = True
    extra: dict = field(default_factory=dict)
    #: the right-hand scale's label, for the lines with ``right`` set
    y2_label: str = ""


def thin(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points that keep the shape: each bin's lowest and highest value.

    ``x`` is taken to be sorted (time, completion order).  Vectorised: a
    million points thin in milliseconds.  NaNs are ignored within a bin.
    """
    n = len(x)
    if n <= max_points:
        return x, y
    bins = max(1, max_points // 2)
    starts = np.linspace(0, n, bins + 1).astype(np.int64)[:-1]
    starts = np.unique(starts)
    ends = np.append(starts[1:], n) - 1
    low = np.fmin.reduceat(y, starts)
    high = np.fmax.reduceat(y, starts)
    xs = np.empty(2 * len(starts))
    ys = np.empty(2 * len(starts))
    xs[0::2], xs[1::2] = x[starts], x[ends]
    ys[0::2], ys[1::2] = low, high
    return xs, ys


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return []
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    first = math.ceil(lo / step) * step
    ticks, value = [], first
    while value <= hi + step * 1e-9 and len(ticks) < 20:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    """A tick label: short, fixed, and the same on every machine."""
    if value == 0:
        return "0"
    a = abs(value)
    if a >= 1e9:
        return f"{value / 1e9:.3g}G"
    if a >= 1e6:
        return f"{value / 1e6:.3g}M"
    if a >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.4g}"


def _n(value: float) -> str:
    return f"{value:.1f}"


def _finite(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([a[np.isfinite(a)] for a in arrays] or [np.empty(0)])


def _span(values: np.ndarray) -> tuple[float, float]:
    """A scale's range: from 0 (or below, for negative values) to the highest value."""
    lo, hi = min(0.0, float(values.min())), float(values.max())
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def render(chart: Chart, ident: str = "c") -> str:
    """The chart as one ``<figure>`` holding an ``<svg>`` (or its ``empty`` sentence).

    ``ident`` names the chart's clip path; it must be unique in the page.
    """
    title = escape(chart.title)
    if not chart.lines or chart.empty:
        why = escape(chart.empty or "nothing was measured for this chart")
        return f'<figure class="chart empty"><figcaption>{title}</figcaption><p>{why}</p></figure>'
    lines = [(ln, *thin(np.asarray(ln.x, float), np.asarray(ln.y, float))) for ln in chart.lines]
    xs = np.concatenate([x[np.isfinite(x)] for _, x, _ in lines] or [np.zeros(1)])
    has_right = any(ln.right for ln, _, _ in lines) and not all(ln.right for ln, _, _ in lines)
    ys = _finite([y for ln, _, y in lines if not (has_right and ln.right)])
    ys2 = _finite([y for ln, _, y in lines if has_right and ln.right])
    if xs.size == 0 or ys.size == 0:
        return (f'<figure class="chart empty"><figcaption>{title}</figcaption>'
                f"<p>no finite values were recorded</p></figure>")
    x0, x1 = float(xs.min()), float(xs.max())
    if x1 <= x0:
        x1 = x0 + 1.0
    y0, y1 = _span(ys)
    z0, z1 = _span(ys2) if ys2.size else (0.0, 1.0)
    pw = WIDTH - _LEFT - (_RIGHT2 if has_right else _RIGHT)
    ph = HEIGHT - _TOP - _BOTTOM

    def px(v: np.ndarray) -> np.ndarray:
        return _LEFT + (v - x0) / (x1 - x0) * pw

    def py(v: np.ndarray, right: bool = False) -> np.ndarray:
        lo, hi = (z0, z1) if right else (y0, y1)
        return _TOP + ph - (v - lo) / (hi - lo) * ph

    out = [f'<figure class="chart"><figcaption>{title}</figcaption>',
           f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{title}">',
           f'<defs><clipPath id="{{clip}}"><rect x="{_LEFT}" y="{_TOP - 2}" width="{pw}" '
           f'height="{ph + 4}"/></clipPath></defs>',
           f'<rect x="{_LEFT}" y="{_TOP}" width="{pw}" height="{ph}" fill="#fff" stroke="#999"/>']
    for t in _nice_ticks(y0, y1):
        yy = float(py(np.asarray(t)))
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + pw}" y1="{_n(yy)}" y2="{_n(yy)}" '
                   f'stroke="#eee"/><text x="{_LEFT - 4}" y="{_n(yy + 4)}" '
                   f'text-anchor="end">{_fmt(t)}</text>')
    if has_right:  # its own ticks, outside the plot on the right, no grid of their own
        for t in _nice_ticks(z0, z1):
            yy = float(py(np.asarray(t), right=True))
            out.append(f'<text x="{_LEFT + pw + 4}" y="{_n(yy + 4)}">{_fmt(t)}</text>')
        out.append(f'<text transform="translate({WIDTH - 8} {_TOP + ph / 2:.0f}) rotate(90)" '
                   f'text-anchor="middle">{escape(chart.y2_label)}</text>')
    for t in _nice_ticks(x0, x1):
        xx = float(px(np.asarray(t)))
        out.append(f'<text x="{_n(xx)}" y="{_TOP + ph + 14}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<text x="{_LEFT + pw / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle">'
               f"{escape(chart.x_label)}</text>")
    out.append(f'<text transform="translate(12 {_TOP + ph / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{escape(chart.y_label)}</text>')
    out.append('<g clip-path="url(#{clip})">')
    for line, x, y in lines:
        ok = np.isfinite(x) & np.isfinite(y)
        colour = PALETTE[line.colour % len(PALETTE)]
        name = escape(line.name)
        ys_px = py(y[ok], right=has_right and line.right)
        if line.points_only:
            dots = "".join(f'<circle cx="{_n(a)}" cy="{_n(b)}" r="1.6"/>'
                           for a, b in zip(px(x[ok]), ys_px))
            out.append(f'<g fill="{colour}"><title>{name}</title>{dots}</g>')
            continue
        pts = " ".join(f"{_n(a)},{_n(b)}" for a, b in zip(px(x[ok]), ys_px))
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} '
                   f'points="{pts}"><title>{name}</title></polyline>')
    out.append("</g></svg>")
    if chart.legend and len(chart.lines) > 1:
        items = []
        for line in chart.lines:
            colour = PALETTE[line.colour % len(PALETTE)]
            style = "dashed" if line.dashed else "solid"
            items.append(f'<span class="key" style="border-top:3px {style} {colour}"></span>'
                         f"{escape(line.name)}")
        out.append('<p class="legend">' + " ".join(f"<span>{i}</span>" for i in items) + "</p>")
    if chart.note:
        out.append(f'<p class="note">{escape(chart.note)}</p>')
    out.append("</figure>")
    return "".join(out).replace("{clip}", f"clip-{escape(ident)}")


#: the height of one lane of the timeline's mark labels, and a label's width per character
_MARK_LANE, _CHAR_W = 12, 6.2  # (10px sans: DejaVu Sans, the widest usual one, is ~6px a letter)


def _lanes(xs: Sequence[float], labels: Sequence[str]) -> list[int]:
    """The lane (row) of each mark's label, so no two labels overlap: the first lane that is
    free where the label goes, labels taken left to right."""
    ends: list[float] = []  # per lane, where its last label ends
    lanes = []
    for x, label in zip(xs, labels):
        half = len(label) * _CHAR_W / 2 + 3
        lane = next((i for i, end in enumerate(ends) if end <= x - half), len(ends))
        if lane == len(ends):
            ends.append(0.0)
        ends[lane] = x + half
        lanes.append(lane)
    return lanes


def timeline(bars: Sequence[tuple[str, float, float, str, str]], *, start: float, end: float,
             colours: dict[str, str], marks: Sequence[tuple] = ()) -> str:
    """One horizontal bar per job: ``(label, t0, t1, outcome, mark)`` in seconds since epoch.

    ``mark`` (``"attempt 2"``…) is written after the bar, so a job the night
    had to take twice is seen at a glance.  ``marks`` are the night's runner
    turns, ``(time, label[, colour])`` in time order (a death and resume, a
    stop, a resume): each a dashed line across the night with its label in a
    strip above the bars, in as many lanes as keep the labels apart, so no
    label covers a bar or another label.
    """
    if not bars or end <= start:
        return '<p class="note">No job has started yet: there is no timeline to draw.</p>'
    row, label_w, width = 16, 150, WIDTH
    shown = list(bars)[:400]
    span = end - start
    plot = width - label_w - 80

    def px(t: float) -> float:
        return label_w + (t - start) / span * plot

    drawn = [(float(m[0]), str(m[1]), m[2] if len(m) > 2 else "#c62828") for m in marks
             if start <= m[0] <= end]
    lanes = _lanes([px(t) for t, _, _ in drawn], [label for _, label, _ in drawn])
    top = (max(lanes) + 1) * _MARK_LANE + 4 if drawn else 0
    bottom = top + 4 + len(shown) * row
    height = bottom + 26
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="timeline of the night">']
    for i, (label, t0, t1, outcome, mark) in enumerate(shown):
        y = top + 4 + i * row
        colour = colours.get(outcome, "#999")
        a, b = px(t0), px(max(t1, t0))
        out.append(f'<text x="{label_w - 6}" y="{y + 11}" text-anchor="end">{escape(label[:24])}'
                   f"</text>")
        out.append(f'<rect x="{_n(a)}" y="{y + 2}" width="{_n(max(1.5, b - a))}" height="{row - 5}" '
                   f'fill="{colour}"><title>{escape(label)}: {escape(outcome)}</title></rect>')
        if mark:
            out.append(f'<text x="{_n(b + 4)}" y="{y + 11}">{escape(mark)}</text>')
    for (t, label, colour), lane in zip(drawn, lanes):
        x = _n(px(t))
        out.append(f'<line x1="{x}" x2="{x}" y1="{(lane + 1) * _MARK_LANE + 1}" y2="{bottom}" '
                   f'stroke="{colour}" stroke-dasharray="3 2"><title>{escape(label)}</title>'
                   f'</line><text x="{x}" y="{(lane + 1) * _MARK_LANE - 2}" fill="{colour}" '
                   f'text-anchor="middle">{escape(label)}</text>')
    axis_y = bottom + 14
    ticks = _nice_ticks(0.0, span)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else span
    for t in ticks:
        out.append(f'<text x="{_n(px(start + t))}" y="{axis_y}" text-anchor="middle">'
                   f"{_clock(t, step)}</text>")
    out.append("</svg>")
    if len(bars) > len(shown):
        out.append(f'<p class="note">{len(bars) - len(shown)} more jobs are not drawn; '
                   "the table below lists every job.</p>")
    return "".join(out)


def _clock(seconds: float, step: float = 60.0) -> str:
    """A tick of the night's clock (``+3:20``); in seconds when the ticks are less than a
    minute apart (``+12s``, ``+0.5s``), so a short night's ticks are not all ``+0:00``."""
    if step < 1.0:
        return f"+{seconds:.1f}s"
    if step < 60.0 and seconds < 60.0:
        return f"+{seconds:.0f}s"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"+{h}:{m:02d}" if h else f"+{m}:{s:02d}"
