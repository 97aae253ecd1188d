"""Line plots as standalone SVG text, for docs/results.md (no plotting library on the machine).

line_plot(title, x_label, y_label, series, ...) -> str
  series: list of (name, [(x, y), ...]); points with y None are skipped. Optional y_range=(lo, hi),
  log_x=True for latency-like axes (x = 0 is drawn at the left edge), and a dashed horizontal line at
  `reference` (e.g. efficiency 0.9 or a target accuracy).
"""
import math
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]


def _ticks(lo, hi, count=5):
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * step:
            step *= m
            break
    first = math.ceil(lo / step) * step
    ticks, t = [], first
    while t <= hi + 1e-9 * step:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _fmt(v):
    return f"{v:g}"


def line_plot(title, x_label, y_label, series, y_range=None, log_x=False, reference=None, reference_label="",
              width=640, height=400, x_ticks=None):
    left, right, top, bottom = 64, 170, 36, 52
    pw, ph = width - left - right, height - top - bottom
    points = [(x, y) for _, pts in series for x, y in pts if y is not None]
    if not points:
        points = [(0, 0), (1, 1)]
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]

    def fx_raw(x):
        return math.log10(max(x, 1e-9)) if log_x else x

    if log_x:
        positive = [x for x in xs if x > 0] or [1]
        x_lo, x_hi = math.log10(min(positive)) - 0.3, math.log10(max(positive))
    else:
        x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_hi = x_lo + 1
    y_lo, y_hi = y_range if y_range else (min(ys + ([reference] if reference is not None else [])),
                                          max(ys + ([reference] if reference is not None else [])))
    if y_hi == y_lo:
        y_hi = y_lo + 1
    pad = 0.05 * (y_hi - y_lo)
    if not y_range:
        y_lo, y_hi = y_lo - pad, y_hi + pad

    def px(x):
        v = x_lo if (log_x and x <= 0) else fx_raw(x)
        return left + (v - x_lo) / (x_hi - x_lo) * pw

    def py(y):
        return top + ph - (y - y_lo) / (y_hi - y_lo) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>']
    for t in _ticks(y_lo, y_hi):
        y = py(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    tick_xs = x_ticks if x_ticks is not None else sorted(set(xs))
    if len(tick_xs) > 10:
        tick_xs = _ticks(min(xs), max(xs))
    for t in tick_xs:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="#444"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'{escape(y_label)}</text>')
    if reference is not None:
        y = py(reference)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#555" '
                   f'stroke-dasharray="6,4"/>')
        if reference_label:
            out.append(f'<text x="{left + pw - 4}" y="{y - 4:.1f}" text-anchor="end" fill="#555">'
                       f'{escape(reference_label)}</text>')
    for i, (name, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for x, y in pts:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = top + 14 + 18 * i
        out.append(f'<line x1="{left + pw + 12}" y1="{ly - 4}" x2="{left + pw + 32}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 36}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
