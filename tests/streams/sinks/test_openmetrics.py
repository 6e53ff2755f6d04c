"""streams/sinks/openmetrics.py: the OpenMetrics archive written at event-time steps."""

from __future__ import annotations

import io

from dpmstream.streams.sinks.openmetrics import write_openmetrics


def test_empty_input_writes_only_eof():
    out = io.StringIO()
    summary = write_openmetrics([], None, out)
    assert out.getvalue() == "# EOF\n" and summary.steps == 0


def test_quiet_gaps_cost_no_samples():
    base = 1_313_152_300_000
    calls = [{"kind": "call", "host": "h", "daemon": "dpns", "pid": 1, "thread": 0, "op": "statg",
              "client": "c", "started": t, "ended": t + 2, "duration_ms": 2, "rc": 0, "auth_ms": None}
             for t in (base, base + 30 * 86_400_000)]  # a month apart
    out = io.StringIO()
    summary = write_openmetrics(calls, None, out, step_s=60)
    assert summary.steps <= 12  # 5 min after each event, not 43 200 steps
    assert out.getvalue().endswith("# EOF\n")
