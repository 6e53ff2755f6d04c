"""A small SVG plotter for the report's figures: panels with linear, logarithmic and time
axes, their ticks, grids, titles and legends, drawn as SVG text the page inlines.

Coordinates are pixels of a viewBox 1000 wide (the page shows a figure at most about that
wide, and scales it with the page). Text is SVG text in the page's sans-serif font: it
stays selectable and searchable, and no font is fetched. Text widths are estimated from
the characters (DejaVu Sans proportions), enough to lay legends and margins out.
Each figure passes its own id prefix, so ids (hatch patterns) never clash once inlined.
"""

from __future__ import annotations

import math
from itertools import chain, repeat

from dpmstream.parsers import extension
from dpmstream.streams.sinks.summary import moment

WIDTH = 1000
FONT = "'DejaVu Sans', 'Helvetica Neue', Arial, sans-serif"
INK, MUTED, AXIS, GRID = "#333333", "#444444", "#888888", "#e5e5e5"


def escape(text: str) -> str:
    """`text` safe in markup and in a quoted attribute: html.escape(text), the same five
    replacements in the same order, written here because importing html reads its
    entity tables (~7.7 M instructions of each report, issue 30) and the page needs only
    this. tests/report/test_figures.py pins the two equal."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#x27;"))


_NARROW = set("il.,:;'|!()[]1 fjtrI-")
_WIDE = set("mwMW%@")


def text_width(text: str, size: float) -> float:
    """An estimate of the drawn width of `text` at font size `size`, in pixels."""
    em = sum(0.34 if c in _NARROW else 0.9 if c in _WIDE else 0.72 if c.isupper() else 0.6
             for c in text)
    return em * size


def num(v: float) -> str:
    """A coordinate, short: two decimals at most."""
    return f"{v:.2f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


# The endings num() drops from a %.2f number, each with what it leaves: "12.00" -> "12",
# "12.50" -> "12.5" (each number has exactly two decimals and no digit follows it, so no
# other text ends so). Replaced by str.replace, a scan in C per ending: a regex with
# look-arounds tried at every character was ~18 M of a report's instructions (issue 30).
_ENDINGS = ((".00", ""),) + tuple((f".{d}0", f".{d}") for d in "123456789")


def python_nums(template: str, values) -> str:
    """`template` % `values`, its %.2f numbers written as num() writes each (floats, and
    ints below 2**53): one formatting and a few replacements for a path of thousands of
    points, where a Python call per number was most of the scatter's cost (issue 30).
    `template` holds no "." before a digit, no digit right after a %.2f, no "nan" and
    no "inf". `nums` is this, compiled where the extension is built
    (native/src/two_decimals.rs); this stays its reference."""
    # + 0.0 turns -0.0 into 0.0, which num() writes "0" (a %.2f writes "-0.00").
    text = template % tuple(map((0.0).__add__, values))
    for ending, kept in _ENDINGS:
        text = text.replace(ending, kept)
    if "nan" in text or "inf" in text:
        raise ValueError(f"not a finite coordinate in {text[:80]!r}")   # as num() refuses one
    return text


# The ~9 k coordinates of a report's scatter and timeline, each through "%.2f" and the
# text through the endings' ten scans, were ~30 M instructions (issue 30); the compiled
# one writes each number once, rounded exactly as "%.2f" rounds. A value that is not
# finite, or a template with another conversion, the reference answers.
nums = extension.compiled_else("two_decimals", python_nums)


class Svg:
    def __init__(self, width: float, height: float, prefix: str):
        self.width, self.height, self.prefix = width, height, prefix
        self.parts: list[str] = []
        self.defs: list[str] = []

    def add(self, element: str) -> None:
        self.parts.append(element)

    def rect(self, x, y, w, h, fill, **attrs) -> None:
        if w < 0:
            x, w = x + w, -w
        if h < 0:
            y, h = y + h, -h
        self.add(f'<rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" '
                 f'fill="{fill}"{_attrs(attrs)}/>')

    def line(self, x1, y1, x2, y2, stroke, width=1.0, dash=None, **attrs) -> None:
        self.add(f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" '
                 f'stroke="{stroke}" stroke-width="{num(width)}"{_dash(dash)}{_attrs(attrs)}/>')

    def path(self, d: str, fill="none", stroke="none", width=1.0, dash=None, **attrs) -> None:
        self.add(f'<path d="{d}" fill="{fill}" stroke="{stroke}" stroke-width="{num(width)}"'
                 f'{_dash(dash)}{_attrs(attrs)}/>')

    def text(self, x, y, s: str, size=11.0, anchor="start", colour=INK, bold=False,
             valign="baseline", rotate=False) -> None:
        """`valign`: baseline, middle (centred on y) or top (hanging from y)."""
        dy = {"baseline": "", "middle": ' dy="0.35em"', "top": ' dy="0.8em"'}[valign]
        weight = ' font-weight="bold"' if bold else ""
        turn = f' transform="rotate(-90 {num(x)} {num(y)})"' if rotate else ""
        self.add(f'<text x="{num(x)}" y="{num(y)}"{dy} font-size="{num(size)}" '
                 f'text-anchor="{anchor}" fill="{colour}"{weight}{turn}>{escape(s)}</text>')

    def hatch(self, colour: str) -> str:
        """A fill of diagonal lines; returns its url()."""
        pid = f"{self.prefix}-hatch{len(self.defs)}"
        self.defs.append(f'<pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse" '
                         f'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" '
                         f'stroke="{colour}" stroke-width="1.2"/></pattern>')
        return f"url(#{pid})"

    def render(self, label: str) -> str:
        defs = f"<defs>{''.join(self.defs)}</defs>" if self.defs else ""
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {num(self.width)} '
                f'{num(self.height)}" width="{num(self.width)}" height="{num(self.height)}" '
                f'role="img" aria-label="{escape(label)}" font-family="{escape(FONT)}">'
                f'{defs}<rect width="100%" height="100%" fill="#ffffff"/>'
                + "".join(self.parts) + "</svg>")


def _attrs(attrs: dict) -> str:
    return "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())


def _dash(dash) -> str:
    return f' stroke-dasharray="{dash}"' if dash else ""


# -- scales and ticks ---------------------------------------------------------------------

# Scale and Key are plain classes, not dataclasses: every report imports them, and a
# dataclass compiles its generated methods as its module is imported (issue 30).

class Scale:
    """Data [lo, hi] onto pixels [a, b] (b < a for a y axis: up is smaller y)."""

    __slots__ = ("lo", "hi", "a", "b", "log")

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False):
        self.lo, self.hi, self.a, self.b, self.log = lo, hi, a, b, log

    def __call__(self, v: float) -> float:
        # One value (a tick, a bar's edge) mapped by many's one rule: ~3 k instructions a
        # call more than arithmetic of its own, +0.1% of a report's (838 calls).
        return self.many((v,))[0]

    def many(self, values) -> list[float]:
        """Each of `values` on the pixels, in one comprehension: a path's thousands of
        points without a call each."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            values = list(map(math.log10, map(max, values, repeat(self.lo * 1e-3))))
        else:
            lo, hi, values = self.lo, self.hi, list(values)
        if hi == lo:
            return [self.a] * len(values)
        a, span, extent = self.a, hi - lo, self.b - self.a
        return [a + (v - lo) / span * extent for v in values]


def nice_step(span: float, most: int, integer: bool = False) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k that cuts `span` into at most `most` steps."""
    if span <= 0:
        return 1.0
    raw = span / most
    k = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        step = m * k
        if step >= raw * (1 - 1e-9) and (not integer or step >= 1 and step == int(step)):
            return step
    return 10 * k


def nice_top(hi: float, most: int = 6, integer: bool = False) -> float:
    """`hi` rounded up to a whole tick step."""
    if hi <= 0:
        return 1.0
    step = nice_step(hi, most, integer)
    return math.ceil(hi / step - 1e-9) * step


def linear_ticks(lo: float, hi: float, most: int = 6, integer: bool = False) -> list[float]:
    step = nice_step(hi - lo, most, integer)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi * (1 + 1e-9) + 1e-12:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


def log_ticks(lo: float, hi: float, subs=(1.0,)) -> list[float]:
    """1, 2, 5 (or `subs`) of each decade within [lo, hi]."""
    out = []
    for d in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for s in subs:
            v = s * 10 ** d
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.append(v)
    return out


def log_bounds(lo: float, hi: float) -> tuple[float, float]:
    """The whole decades around [lo, hi]."""
    return 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi) + 1e-9)


def seconds(v: float) -> str:
    """A tick label in plain seconds: 0.02, not 2x10^-2."""
    return f"{v:.6g}"


# Time ticks: whole seconds, minutes, hours or days of the shown zone's wall clock.
TIME_STEPS_MS = [s * 1000 for s in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200,
                                    1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
                                    604800)]


def time_ticks(t0: int, t1: int, zone, most: int = 9) -> tuple[list[int], int]:
    """Tick instants (ms) at whole steps of the zone's wall clock, and the step."""
    span = max(t1 - t0, 1)
    step = next((s for s in TIME_STEPS_MS if span / s <= most), TIME_STEPS_MS[-1])
    offset = int(moment(t0, zone).utcoffset().total_seconds() * 1000) if zone else 0
    first = -(-(t0 + offset) // step) * step - offset
    return list(range(first, t1 + 1, step)), step


def time_label(ms: int, step: int, zone) -> str:
    t = moment(ms, zone)
    if step >= 86_400_000:
        return t.strftime("%b-%d")
    if step >= 60_000:
        return t.strftime("%H:%M") if (t.hour, t.minute) != (0, 0) else t.strftime("%b-%d")
    return t.strftime("%H:%M:%S")


def time_offset_text(t0: int, t1: int, step: int, zone) -> str:
    """The date under a time axis, with the zone's abbreviation valid at each end
    (docs/report.md, "Time labels"): "2011-Aug-12 CEST", "2011-Oct-30 CEST to CET"."""
    a, b = moment(t0, zone), moment(t1, zone)
    names = [t.tzname() or "UTC" for t in (a, b)]
    zone_text = names[0] if names[0] == names[1] else f"{names[0]} to {names[1]}"
    if step >= 86_400_000 or a.date() != b.date():
        dates = f"{a:%Y-%b-%d} to {b:%Y-%b-%d}"
    else:
        dates = f"{a:%Y-%b-%d}"
    return f"{dates} {zone_text}"


# -- a panel: one plot area with its axes --------------------------------------------------

class Panel:
    def __init__(self, svg: Svg, x: float, y: float, w: float, h: float):
        self.svg, self.x, self.y, self.w, self.h = svg, x, y, w, h
        self.sx: Scale | None = None
        self.sy: Scale | None = None

    def scales(self, xlo, xhi, ylo, yhi, xlog=False, ylog=False) -> None:
        self.sx = Scale(xlo, xhi, self.x, self.x + self.w, xlog)
        self.sy = Scale(ylo, yhi, self.y + self.h, self.y, ylog)

    def title(self, text: str, size=12.0) -> None:
        self.svg.text(self.x, self.y - 8, text, size=size, bold=True, colour="#222222")

    def frame(self) -> None:
        """The left and bottom spines (top and right left open)."""
        s = self.svg
        s.line(self.x, self.y, self.x, self.y + self.h, AXIS, 0.8)
        s.line(self.x, self.y + self.h, self.x + self.w, self.y + self.h, AXIS, 0.8)

    def xticks(self, ticks, label=str, grid=True, labels=True, size=10.0) -> None:
        s = self.svg
        for v in ticks:
            px = self.sx(v)
            if grid:
                s.line(px, self.y, px, self.y + self.h, GRID, 0.6)
            s.line(px, self.y + self.h, px, self.y + self.h + 4, AXIS, 0.8)
            if labels:
                text = label(v)
                half = text_width(text, size) / 2
                # A label at an end of the axis stays inside the figure.
                anchor, at = ("end", s.width - 2) if px + half > s.width - 2 else (
                    ("start", 2) if px - half < 2 else ("middle", px))
                s.text(at, self.y + self.h + 6, text, size=size, anchor=anchor,
                       colour=MUTED, valign="top")

    def yticks(self, ticks, label=str, grid=True, size=10.0) -> None:
        s = self.svg
        for v in ticks:
            py = self.sy(v)
            if grid:
                s.line(self.x, py, self.x + self.w, py, GRID, 0.6)
            s.line(self.x - 4, py, self.x, py, AXIS, 0.8)
            s.text(self.x - 6, py, label(v), size=size, anchor="end", colour=MUTED,
                   valign="middle")

    def ylabel(self, text: str, gap: float, size=10.5) -> None:
        self.svg.text(self.x - gap, self.y + self.h / 2, text, size=size, anchor="middle",
                      rotate=True)

    def xlabel(self, text: str, size=10.5) -> None:
        self.svg.text(self.x + self.w / 2, self.y + self.h + 34, text, size=size,
                      anchor="middle")

    def time_axis(self, t0: int, t1: int, zone, labels=True) -> None:
        ticks, step = time_ticks(t0, t1, zone)
        self.xticks(ticks, lambda t: time_label(t, step, zone), labels=labels)
        if labels:
            self.svg.text(self.x + self.w, self.y + self.h + 36,
                          time_offset_text(t0, t1, step, zone), size=10, anchor="end",
                          colour=MUTED)

    def note(self, text: str, colour="#666666", size=10.0) -> None:
        """Centred in the panel: what there is when nothing was drawn."""
        self.svg.text(self.x + self.w / 2, self.y + self.h / 2, text, size=size,
                      anchor="middle", colour=colour, valign="middle")


# -- legends ------------------------------------------------------------------------------

class Key:
    """One legend entry: a swatch of `kind` (box, line, dot, hatch) and its label."""

    __slots__ = ("label", "colour", "kind", "dash", "width", "fill")

    def __init__(self, label: str, colour: str, kind: str = "box", dash: str | None = None,
                 width: float = 1.6, fill: str | None = None):
        self.label, self.colour, self.kind, self.dash, self.width = label, colour, kind, dash, width
        self.fill = fill     # a box's fill when not `colour` (a hatch's url)


SWATCH, KEY_GAP, ROW = 22, 14, 15


def legend_size(keys: list[Key], ncol: int, size=10.0) -> tuple[float, float, list[float]]:
    ncol = max(1, min(ncol, len(keys)))
    cols = [0.0] * ncol
    for i, k in enumerate(keys):
        cols[i % ncol] = max(cols[i % ncol], SWATCH + 5 + text_width(k.label, size))
    rows = math.ceil(len(keys) / ncol)
    return sum(cols) + KEY_GAP * (ncol - 1), rows * ROW, cols


def legend(svg: Svg, keys: list[Key], x: float, y: float, ncol: int, anchor="left",
           size=10.0) -> float:
    """Keys in `ncol` columns, row by row, from (x, y) at their top-left (or top-right when
    `anchor` is right, or top-centre when centre). Returns the height used."""
    if not keys:
        return 0.0
    width, height, cols = legend_size(keys, ncol, size)
    left = {"left": x, "right": x - width, "centre": x - width / 2}[anchor]
    ncol = len(cols)
    for i, k in enumerate(keys):
        cx = left + sum(cols[:i % ncol]) + KEY_GAP * (i % ncol)
        cy = y + (i // ncol) * ROW + ROW / 2
        if k.kind == "line":
            svg.line(cx, cy, cx + SWATCH, cy, k.colour, k.width, k.dash)
        elif k.kind == "dot":
            svg.path(f"M{num(cx + SWATCH / 2)} {num(cy)}h0", stroke=k.colour, width=8,
                     stroke_linecap="round")
        else:
            svg.rect(cx + 3, cy - 5, SWATCH - 6, 10, k.fill or k.colour,
                     stroke=k.colour if k.fill else "none", stroke_width="0.6")
        svg.text(cx + SWATCH + 5, cy, k.label, size=size, colour=INK, valign="middle")
    return height


# -- shapes -------------------------------------------------------------------------------

def steps_path(sx: Scale, sy: Scale, edges, values) -> str:
    """A line of `values`, each level across its bin [edges[i], edges[i+1]] (a step plot
    over bin middles, where="mid")."""
    if not values:
        return ""
    xs, ys = sx.many(edges[:len(values) + 1]), sy.many(values)
    return nums("M%.2f %.2fH%.2f" + "L%.2f %.2fH%.2f" * (len(values) - 1),
                chain.from_iterable(zip(xs, ys, xs[1:])))


def steps_area(sx: Scale, sy: Scale, edges, values, floor: float = 0.0) -> str:
    """The area under steps_path, down to `floor`."""
    if not values:
        return ""
    base = sy(floor)
    xs, ys = sx.many(edges[:len(values) + 1]), sy.many(values)
    return nums("M%.2f %.2f" + "V%.2fH%.2f" * len(values) + "V%.2fZ",
                chain((xs[0], base), chain.from_iterable(zip(ys, xs[1:])), (base,)))


def dots_path(xs, ys) -> str:
    """Zero-length segments at (xs[i], ys[i]) (pixels): with round caps each is a dot as
    wide as the stroke."""
    return nums("M%.2f %.2fh0" * len(xs), chain.from_iterable(zip(xs, ys)))


def line_path(xs, ys) -> str:
    """A polyline through (xs[i], ys[i]) (pixels)."""
    return "M" + nums("L".join(["%.2f %.2f"] * len(xs)), chain.from_iterable(zip(xs, ys)))


def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), p in [0, 100]."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
