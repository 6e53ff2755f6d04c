"""Threshold specs of check_dpm, and the metric names they and the perfdata use.

A spec is `SUBJECT=RANGE`, RANGE in the Nagios range syntax (nagiosplugin.Range:
`10` is 0..10, `~:2` is up to 2, `@1:5` alerts inside 1..5):

    PHASE:pNN=RANGE      quantile NN of a request phase, seconds   proc:p95=~:2
    ns:OP:pNN=RANGE      quantile NN of a name-server call op       ns:statg:p95=0.5
    failed_rate=RANGE    failed / finished requests in the window   failed_rate=0.05
    incomplete_rate=RANGE  incomplete (timed out) / finished        incomplete_rate=0.1

Metric (and perfdata) names: `proc_p95`, `ns_statg_p95`, `failed_rate`, `incomplete_rate`.

A DOME site (check_dpm --dome, docs/dome.md) has its own subjects (DOME_SUBJECTS; the
rates failed_rate and incomplete_rate are then of its puts):

    dome_call:pNN=RANGE        quantile NN of DOME call durations, seconds   dome_call:p95=0.5
    dome_error_rate=RANGE      calls answered 4xx/5xx / calls answered        dome_error_rate=0.05
    dome_fs_disabled=RANGE     filesystems the head has disabled, now         dome_fs_disabled=0
    dome_fs_free_ratio=RANGE   lowest free / size of a filesystem, now        dome_fs_free_ratio=0.1:
    dome_fs_free_bytes=RANGE   lowest free bytes of a filesystem, now         dome_fs_free_bytes=100000000000:
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nagiosplugin import Range

from dpmstream.parsers.records import PHASES

PHASE_NAMES = tuple(phase for _, phase in PHASES)
RATES = ("failed_rate", "incomplete_rate")
DEFAULT_QUANTILES = (0.5, 0.95, 0.99)

DOME_CALL = "dome_call"
# The DOME subjects without a quantile, declared once: the parser, check_dpm's help and
# its contexts read this table. name -> (what it is, example spec).
DOME_SUBJECTS = {
    "dome_error_rate": ("DOME calls answered 4xx or 5xx / calls answered (0..1)",
                        "-w dome_error_rate=0.05"),
    "dome_fs_disabled": ("filesystems the head has disabled now (a count)",
                         "-c dome_fs_disabled=0"),
    "dome_fs_free_ratio": ("lowest free / size of any filesystem now (0..1)",
                           "-w dome_fs_free_ratio=0.1:"),
    "dome_fs_free_bytes": ("lowest free bytes of any filesystem now",
                           "-c dome_fs_free_bytes=100000000000:"),
}
# What --dome measures: the subjects of a DOME site (the put rates keep their names).
DOME_KINDS = frozenset(("dome", DOME_CALL))

_QUANTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?)\Z")
_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}\Z")


class SpecError(ValueError):
    """A threshold spec that cannot be used, with the reason."""


def parse_quantile(text: str) -> float:
    """`p95` -> 0.95, `p99.9` -> 0.999, `p50` -> 0.5."""
    m = _QUANTILE.match(text)
    if not m or not 0 < float(m.group(1)) < 100:
        raise SpecError(f"bad quantile {text!r}: write pNN with 0 < NN < 100, e.g. p95 or p99.9")
    return round(float(m.group(1)) / 100.0, 6)


def quantile_label(q: float) -> str:
    """0.95 -> 'p95', 0.999 -> 'p99.9' (inverse of parse_quantile)."""
    text = f"{q * 100:.4f}".rstrip("0").rstrip(".")
    return "p" + text


def phase_metric(phase: str, q: float) -> str:
    return f"{phase}_{quantile_label(q)}"


def ns_metric(op: str, q: float) -> str:
    return f"ns_{op}_{quantile_label(q)}"


def dome_call_metric(q: float) -> str:
    return f"{DOME_CALL}_{quantile_label(q)}"


@dataclass(frozen=True)
class Subject:
    """What a threshold applies to: kind 'phase', 'ns', 'rate' (of requests, or of a
    DOME site's puts), 'dome' (a DOME_SUBJECTS name) or 'dome_call' (a quantile)."""

    kind: str
    name: str  # phase, op, or rate name
    quantile: float | None = None

    @property
    def metric(self) -> str:
        if self.kind == "phase":
            return phase_metric(self.name, self.quantile)
        if self.kind == "ns":
            return ns_metric(self.name, self.quantile)
        if self.kind == DOME_CALL:
            return dome_call_metric(self.quantile)
        return self.name


def parse_subject(text: str) -> Subject:
    parts = text.split(":")
    if len(parts) == 1 and parts[0] in RATES:
        return Subject("rate", parts[0])
    if len(parts) == 1 and parts[0] in DOME_SUBJECTS:
        return Subject("dome", parts[0])
    if len(parts) == 2 and parts[0] == DOME_CALL:
        return Subject(DOME_CALL, DOME_CALL, parse_quantile(parts[1]))
    if len(parts) == 2:
        phase, q = parts
        if phase not in PHASE_NAMES:
            raise SpecError(f"unknown phase {phase!r}; phases are {', '.join(PHASE_NAMES)}")
        return Subject("phase", phase, parse_quantile(q))
    if len(parts) == 3 and parts[0] == "ns":
        if not _OP.match(parts[1]):
            raise SpecError(f"bad name-server op {parts[1]!r}")
        return Subject("ns", parts[1], parse_quantile(parts[2]))
    raise SpecError(
        f"bad threshold subject {text!r}: use PHASE:pNN, ns:OP:pNN, failed_rate or "
        f"incomplete_rate; on a DOME site (--dome) {DOME_CALL}:pNN, {', '.join(DOME_SUBJECTS)}")


def parse_spec(text: str) -> tuple[Subject, Range]:
    """`proc:p95=~:2` -> (Subject('phase', 'proc', 0.95), Range('~:2'))."""
    subject, sep, spec = text.partition("=")
    if not sep or not spec:
        raise SpecError(f"bad threshold {text!r}: expected SUBJECT=RANGE, e.g. proc:p95=~:2")
    try:
        rng = Range(spec)
    except ValueError as exc:
        raise SpecError(f"bad range {spec!r} in {text!r}: {exc}") from exc
    return parse_subject(subject.strip()), rng


@dataclass
class Thresholds:
    """Warning and critical ranges by metric name, and what must be measured for them."""

    warning: dict[str, Range] = field(default_factory=dict)
    critical: dict[str, Range] = field(default_factory=dict)
    subjects: dict[str, Subject] = field(default_factory=dict)

    def add(self, level: str, text: str) -> None:
        subject, rng = parse_spec(text)
        self.subjects[subject.metric] = subject
        (self.warning if level == "warning" else self.critical)[subject.metric] = rng

    def phase_quantiles(self, reported=DEFAULT_QUANTILES) -> list[float]:
        """Quantiles to measure for every phase: the reported ones plus any thresholded."""
        qs = set(reported)
        qs.update(s.quantile for s in self.subjects.values() if s.kind == "phase")
        return sorted(qs)

    def dome_call_quantiles(self, reported=DEFAULT_QUANTILES) -> list[float]:
        """Quantiles of DOME call durations to measure: the reported ones plus any
        thresholded."""
        return sorted(set(reported) | {s.quantile for s in self.subjects.values()
                                       if s.kind == DOME_CALL})

    def legacy_only(self) -> list[str]:
        """Thresholded subjects a DOME site has no value for (request phases, name-server
        ops): refused with --dome."""
        return [m for m, s in self.subjects.items() if s.kind in ("phase", "ns")]

    def dome_only(self) -> list[str]:
        """Thresholded subjects only a DOME site has: refused without --dome."""
        return [m for m, s in self.subjects.items() if s.kind in DOME_KINDS]

    def ns_wanted(self) -> dict[str, list[float]]:
        """op -> quantiles to measure for name-server ops that carry a threshold."""
        out: dict[str, set[float]] = {}
        for s in self.subjects.values():
            if s.kind == "ns":
                out.setdefault(s.name, set()).add(s.quantile)
        return {op: sorted(qs) for op, qs in sorted(out.items())}


def build(warnings: list[str] | None, criticals: list[str] | None) -> Thresholds:
    th = Thresholds()
    for text in warnings or ():
        th.add("warning", text)
    for text in criticals or ():
        th.add("critical", text)
    return th
