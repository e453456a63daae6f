"""Tiny, dependency-free SVG charts: histogram, horizontal bar chart, line chart.

Why our own: the report and the Dagster asset metadata need a handful of simple plots,
and a plotting stack (matplotlib and friends) would add hundreds of megabytes and a
display backend to an environment that has neither. These functions take plain Python
sequences and return a complete, standalone SVG document as a string, which works
inline in HTML, as a ``data:`` URI in Markdown (:func:`svg_data_uri`), and parses as XML
(the tests check exactly that).

Every piece of text that reaches the SVG goes through :func:`_esc`, so labels taken from
the lake (GPU names, kernel names, PR titles) can never break the document.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

__all__ = [
    "PALETTE",
    "bar_chart",
    "histogram",
    "line_chart",
    "nice_ticks",
    "svg_data_uri",
]

#: Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
)
_AXIS = "#444444"
_GRID = "#e5e5e5"
_CHAR_W = (
    7.0  # generous glyph width (capitals included) at font-size 11, used to size label gutters
)
_FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11"'
#: A chart's map from a data value to a pixel coordinate.
Scale = Callable[[float], float]


# -- small helpers ---------------------------------------------------------------------
def _esc(text: object) -> str:
    """XML-escape text and attribute values (quotes included)."""
    return escape(str(text), {'"': "&quot;"})


def _finite(values: Iterable[float | int | None]) -> list[float]:
    """Drop None, NaN and infinities: one bad cell must not blank a whole chart."""
    out: list[float] = []
    for v in values:
        if v is None:
            continue
        f = float(v)
        if math.isfinite(f):
            out.append(f)
    return out


def _fmt(v: float) -> str:
    """A short tick/annotation label: 1,234 · 12.3 · 1.25 · 0.012 · 1.2e-05."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.2g}"
    if float(v).is_integer():
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def _clip_label(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def nice_ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (1/2/5 × 10^k steps).

    Round ticks are what makes a chart readable at a glance; the range is widened to the
    enclosing ticks so bars never overshoot the axis. ``integer`` keeps the step a whole
    number, for counts (a "0.5 rows" gridline is noise).
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.5 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t < hi + step * 0.5:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _open(width: float, height: float, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" {_FONT}>',
        f"<title>{_esc(title)}</title>",
        f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="13" '
        f'font-weight="bold">{_esc(title)}</text>',
    ]


def _empty(width: float, height: float, title: str, why: str = "no data") -> str:
    parts = _open(width, height, title)
    parts.append(
        f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle" '
        f'fill="#888888">{_esc(why)}</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,…``: base64 rather than percent-encoding because
    Markdown renderers treat parentheses and spaces in a URL as the end of the link."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


# -- shared pieces -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Area:
    """The plot area inside a chart's margins: its left and top edges, width and height."""

    left: int
    top: int
    pw: int
    ph: int

    @property
    def base(self) -> int:
        """The y of the x axis (the plot area's bottom edge)."""
        return self.top + self.ph


def _y_grid(parts: list[str], ticks: Sequence[float], sy: Scale, area: _Area) -> None:
    """A horizontal gridline and its value label at each y tick."""
    left, pw = area.left, area.pw
    for t in ticks:
        y = sy(t)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="{_GRID}"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_esc(_fmt(t))}</text>'
        )


def _x_axis_label(parts: list[str], area: _Area, height: int, x_label: str) -> None:
    """The x axis's label, centred under the plot area."""
    parts.append(
        f'<text x="{area.left + area.pw / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        f"{_esc(x_label)}</text>"
    )


def _axis_labels(parts: list[str], area: _Area, height: int, x_label: str, y_label: str) -> None:
    """The x axis's label under the plot area and the y axis's, rotated, beside it."""
    _x_axis_label(parts, area, height, x_label)
    mid = area.top + area.ph / 2
    parts.append(
        f'<text x="14" y="{mid:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid:.1f})">{_esc(y_label)}</text>'
    )


# -- histogram -------------------------------------------------------------------------
def histogram(
    values: Iterable[float | int | None],
    *,
    bins: int = 20,
    title: str = "",
    x_label: str = "",
    y_label: str = "count",
    log_x: bool = False,
    markers: Mapping[str, float | None] | None = None,
    width: int = 640,
    height: int = 300,
    color: str = PALETTE[0],
) -> str:
    """Counts of ``values`` in ``bins`` equal-width bins.

    ``log_x`` bins in log2 space (the natural scale of speedups: 0.5× and 2× sit the same
    distance from 1×) and labels ticks with the real values. ``markers`` draws labelled
    dashed verticals, e.g. ``{"median": 1.3, "p90": 1.98}`` (a None marker is left out).
    Non-positive values cannot be placed on a log axis and are left out (the subtitle says
    how many).
    """
    data, dropped = _log2_positive(_finite(values)) if log_x else (_finite(values), 0)
    if not data:
        return _empty(width, height, title)
    bins = max(1, int(bins))
    lo, hi = min(data), max(data)
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    counts = [0] * bins
    for v in data:
        idx = min(int((v - lo) / span * bins), bins - 1)
        counts[idx] += 1

    left, right, top, bottom = 56, 16, 34, 44
    area = _Area(left, top, width - left - right, height - top - bottom)
    pw, ph = area.pw, area.ph
    yt = nice_ticks(0, max(counts), 4, integer=True)
    ymax = yt[-1] or 1

    def sx(v: float) -> float:
        return left + (v - lo) / span * pw

    def sy(c: float) -> float:
        return top + ph - c / ymax * ph

    parts = _open(width, height, title)
    subtitle = f"n = {len(data):,}" + (f" ({dropped:,} ≤ 0 left out)" if dropped else "")
    parts.append(
        f'<text x="{width - right:.1f}" y="18" text-anchor="end" fill="#666666">'
        f"{_esc(subtitle)}</text>"
    )
    _y_grid(parts, yt, sy, area)
    _hist_bars(parts, counts, lo, span, log_x, sy, area, color)
    base = area.base
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + pw}" y2="{base}" stroke="{_AXIS}"/>')
    for t, label in _hist_x_ticks(lo, hi, log_x):
        x = sx(t)
        parts.append(
            f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="{_AXIS}"/>'
        )
        parts.append(f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle">{_esc(label)}</text>')
    _hist_markers(parts, markers or {}, log_x, lo, hi, sx, area)
    _axis_labels(parts, area, height, x_label, y_label)
    parts.append("</svg>")
    return "\n".join(parts)


def _log2_positive(data: list[float]) -> tuple[list[float], int]:
    """The log2 of the positive values, and how many were not positive (a log axis has
    no place for them)."""
    positive = [v for v in data if v > 0]
    return [math.log2(v) for v in positive], len(data) - len(positive)


def _hist_bars(
    parts: list[str],
    counts: list[int],
    lo: float,
    span: float,
    log_x: bool,
    sy: Scale,
    area: _Area,
    color: str,
) -> None:
    """One bar per non-empty bin, its tooltip the bin's range in real values."""
    bins = len(counts)
    bw = area.pw / bins
    for i, c in enumerate(counts):
        if not c:
            continue
        x0 = area.left + i * bw
        b_lo, b_hi = lo + i * span / bins, lo + (i + 1) * span / bins
        rng = (2**b_lo, 2**b_hi) if log_x else (b_lo, b_hi)
        parts.append(
            f'<rect x="{x0 + 0.5:.1f}" y="{sy(c):.1f}" width="{max(bw - 1, 0.5):.1f}" '
            f'height="{area.ph + area.top - sy(c):.1f}" fill="{color}">'
            f"<title>{_esc(f'[{_fmt(rng[0])}, {_fmt(rng[1])}): {c:,}')}</title></rect>"
        )


def _hist_x_ticks(lo: float, hi: float, log_x: bool) -> list[tuple[float, str]]:
    """x ticks: real values at round positions (powers of two on a log axis)."""
    if log_x and math.floor(hi) - math.ceil(lo) >= 1:
        k_lo, k_hi = math.ceil(lo), math.floor(hi)
        step = max(1, math.ceil((k_hi - k_lo) / 8))
        return [(float(k), _fmt(2.0**k) + "×") for k in range(k_lo, k_hi + 1, step)]
    if log_x:  # less than two powers of two in range: round real values instead
        return [
            (math.log2(t), _fmt(t) + "×")
            for t in nice_ticks(2.0**lo, 2.0**hi, 5)
            if t > 0 and lo <= math.log2(t) <= hi
        ]
    return [(t, _fmt(t)) for t in nice_ticks(lo, hi, 6) if lo <= t <= hi]


def _hist_markers(
    parts: list[str],
    markers: Mapping[str, float | None],
    log_x: bool,
    lo: float,
    hi: float,
    sx: Scale,
    area: _Area,
) -> None:
    """A labelled dashed vertical per marker inside the x range (None, non-finite and,
    on a log axis, non-positive markers are left out)."""
    top, base = area.top, area.base
    for i, (name, value) in enumerate(markers.items()):
        if value is None or not math.isfinite(value) or (log_x and value <= 0):
            continue
        v = math.log2(value) if log_x else value
        if not lo <= v <= hi:
            continue
        x = sx(v)
        col = PALETTE[(i + 3) % len(PALETTE)]
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{base}" stroke="{col}" '
            f'stroke-dasharray="4 3" stroke-width="1.5"/>'
        )
        # labels near the right edge grow leftwards so they are not clipped
        anchor, tx = ("end", x - 3) if x > area.left + 0.7 * area.pw else ("start", x + 3)
        parts.append(
            f'<text x="{tx:.1f}" y="{top + 10 + 12 * i}" text-anchor="{anchor}" fill="{col}">'
            f"{_esc(f'{name} {_fmt(value)}')}</text>"
        )


# -- bar chart -------------------------------------------------------------------------
def bar_chart(
    labels: Sequence[object],
    values: Sequence[float | int | None],
    *,
    title: str = "",
    x_label: str = "",
    reference: float | None = None,
    width: int = 640,
    bar_height: int = 18,
    max_bars: int = 30,
    color: str = PALETTE[0],
) -> str:
    """Horizontal bars, one per label, in the given order.

    Horizontal because our categories are long (``NVIDIA_H100_80GB_HBM3``,
    ``fused_moe_kernel · fp8_w8a8``) and must stay readable without rotation. The chart
    grows with the number of bars; beyond ``max_bars`` the rest is summarised in the
    subtitle rather than squeezed. ``reference`` draws a dashed line (e.g. speedup 1×).
    Missing values are drawn as an empty row, so the label still shows it exists.
    """
    if len(labels) != len(values):
        raise ValueError(f"bar_chart: {len(labels)} labels but {len(values)} values")
    pairs = list(zip((str(label) for label in labels), values, strict=True))
    hidden = max(0, len(pairs) - max_bars)
    pairs = pairs[:max_bars]
    nums = _finite(v for _, v in pairs)
    if not pairs or not nums:
        return _empty(width, 120, title)
    texts = [_clip_label(lab) for lab, _ in pairs]
    left = min(250, max(60, int(max(len(t) for t in texts) * _CHAR_W) + 16))
    right, top, bottom = 56, 34, 40
    height = top + bottom + bar_height * len(pairs)
    pw = width - left - right
    lo = min(0.0, min(nums))
    hi = max(0.0, max(nums), reference if reference is not None else 0.0)
    ticks = nice_ticks(lo, hi, 5)
    lo, hi = ticks[0], ticks[-1]

    def sx(v: float) -> float:
        return left + (v - lo) / (hi - lo) * pw

    parts = _open(width, height, title)
    if hidden:
        parts.append(
            f'<text x="{width - right:.1f}" y="18" text-anchor="end" fill="#666666">'
            f"{_esc(f'+{hidden:,} more not shown')}</text>"
        )
    base = top + bar_height * len(pairs)
    for t in ticks:
        x = sx(t)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{base}" stroke="{_GRID}"/>')
        parts.append(
            f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle">{_esc(_fmt(t))}</text>'
        )
    zero = sx(0.0)
    for i, ((label, value), text) in enumerate(zip(pairs, texts, strict=True)):
        y = top + i * bar_height
        parts.append(
            f'<text x="{left - 6}" y="{y + bar_height * 0.7:.1f}" text-anchor="end">'
            f"<title>{_esc(label)}</title>{_esc(text)}</text>"
        )
        if value is None or not math.isfinite(float(value)):
            continue
        v = float(value)
        x0, x1 = sorted((zero, sx(v)))
        parts.append(
            f'<rect x="{x0:.1f}" y="{y + 2:.1f}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{bar_height - 4}" fill="{color}">'
            f"<title>{_esc(f'{label}: {_fmt(v)}')}</title></rect>"
        )
        parts.append(
            f'<text x="{x1 + 4:.1f}" y="{y + bar_height * 0.7:.1f}">{_esc(_fmt(v))}</text>'
        )
    parts.append(f'<line x1="{zero:.1f}" y1="{top}" x2="{zero:.1f}" y2="{base}" stroke="{_AXIS}"/>')
    if reference is not None and lo <= reference <= hi:
        x = sx(reference)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{base}" stroke="{PALETTE[3]}" '
            f'stroke-dasharray="4 3" stroke-width="1.5"/>'
        )
    _x_axis_label(parts, _Area(left, top, pw, base - top), height, x_label)
    parts.append("</svg>")
    return "\n".join(parts)


# -- line chart ------------------------------------------------------------------------
def line_chart(
    x_labels: Sequence[object],
    series: Mapping[str, Sequence[float | int | None]],
    *,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 300,
) -> str:
    """One line per series over categorical, evenly spaced x positions (e.g. months).

    Categorical x keeps the function honest for ``YYYY-MM`` strings without date parsing;
    the caller sorts ``x_labels``. ``None`` breaks a line instead of drawing it to zero,
    so a month with no data is not mistaken for a month with zero rows. At most about a
    dozen x labels are printed; every point keeps its exact value in a tooltip.
    """
    xs = [str(x) for x in x_labels]
    for name, ys in series.items():
        if len(ys) != len(xs):
            raise ValueError(
                f"line_chart: series {name!r} has {len(ys)} values for {len(xs)} x labels"
            )
    nums = _finite(v for ys in series.values() for v in ys)
    if not xs or not nums:
        return _empty(width, height, title)
    legend_h = 16 * math.ceil(len(series) / 4) if len(series) > 1 else 0
    left, right, top, bottom = 56, 30, 34 + legend_h, 48
    area = _Area(left, top, width - left - right, height - top - bottom)
    pw, ph = area.pw, area.ph
    ticks = nice_ticks(min(0.0, min(nums)), max(nums), 4, integer=all(v.is_integer() for v in nums))
    lo, hi = ticks[0], ticks[-1]

    def sx(i: int) -> float:
        return left + (pw / 2 if len(xs) == 1 else i / (len(xs) - 1) * pw)

    def sy(v: float) -> float:
        return top + ph - (v - lo) / (hi - lo) * ph

    parts = _open(width, height, title)
    _y_grid(parts, ticks, sy, area)
    base = area.base
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + pw}" y2="{base}" stroke="{_AXIS}"/>')
    _x_category_labels(parts, xs, sx, base)
    for s_idx, (name, ys) in enumerate(series.items()):
        col = PALETTE[s_idx % len(PALETTE)]
        _series_marks(parts, name, ys, xs, col, sx, sy)
        if legend_h:
            lx = left + (s_idx % 4) * (pw / 4)
            ly = 30 + 16 * (s_idx // 4)
            parts.append(f'<rect x="{lx:.1f}" y="{ly:.1f}" width="10" height="10" fill="{col}"/>')
            parts.append(
                f'<text x="{lx + 14:.1f}" y="{ly + 9:.1f}">{_esc(_clip_label(name, 22))}</text>'
            )
    _axis_labels(parts, area, height, x_label, y_label)
    parts.append("</svg>")
    return "\n".join(parts)


def _x_category_labels(
    parts: list[str], xs: list[str], sx: Callable[[int], float], base: int
) -> None:
    """About a dozen of the x labels: every k-th, plus the last one unless it would
    overlap its neighbour."""
    every = max(1, math.ceil(len(xs) / 12))
    last = len(xs) - 1
    for i, x in enumerate(xs):
        if (i % every or 0 < last - i < every) and i != last:
            continue
        parts.append(
            f'<text x="{sx(i):.1f}" y="{base + 16}" text-anchor="middle">'
            f"{_esc(_clip_label(x, 12))}</text>"
        )


def _series_marks(
    parts: list[str],
    name: str,
    ys: Sequence[float | int | None],
    xs: list[str],
    col: str,
    sx: Callable[[int], float],
    sy: Scale,
) -> None:
    """One series: its line (broken at each missing value), then a dot per value with
    the exact value in a tooltip."""
    d: list[str] = []
    pen_up = True
    for i, v in enumerate(ys):
        if v is None or not math.isfinite(float(v)):
            pen_up = True
            continue
        d.append(f"{'M' if pen_up else 'L'}{sx(i):.1f},{sy(float(v)):.1f}")
        pen_up = False
    if d:
        parts.append(f'<path d="{" ".join(d)}" fill="none" stroke="{col}" stroke-width="2"/>')
    for i, v in enumerate(ys):
        if v is None or not math.isfinite(float(v)):
            continue
        parts.append(
            f'<circle cx="{sx(i):.1f}" cy="{sy(float(v)):.1f}" r="2.5" fill="{col}">'
            f"<title>{_esc(f'{name} · {xs[i]}: {_fmt(float(v))}')}</title></circle>"
        )
