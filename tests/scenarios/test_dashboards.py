"""The Grafana dashboards: stable uid, host/op template variables, valid PromQL (promtool),
and every panel query answering data from a real Prometheus fed by a real pipeline run."""

from __future__ import annotations

import json
import math
import re
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.metrics_stack import start_dome_stack, start_live_stack

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "dashboards").glob("*.json"))
RATE_INTERVAL = "2m"  # what Grafana's $__rate_interval stands for in the test


def panels(dashboard: dict):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows


def targets(dashboard: dict):
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield panel, target


def variables(dashboard: dict) -> dict[str, dict]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def substitute(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__interval", "15s")
    expr = expr.replace("$__range", "1h")
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in expr, f"unresolved variable in {expr}"
    return expr


# Each dashboard: its uid, its multi-value template variables (name -> label), and the
# metrics its panels must query.
EXPECTED = {
    "dpm-overview.json": ("dpmstream-overview", {"host": "host", "op": "op"}, (
        "dpm_request_phase_seconds_bucket", "dpm_requests_total", "dpm_requests_in_flight",
        "dpm_slow_queue_depth", "dpm_request_polls", "dpm_call_seconds_bucket",
        "dpmstream_lines_total", "dpmstream_event_lag_seconds")),
    "dpm-dome.json": ("dpmstream-dome", {"host": "host", "command": "command", "server": "server"}, (
        "dpm_dome_calls_total", "dpm_dome_call_seconds_bucket",
        "dpm_dome_put_to_putdone_seconds_bucket", "dpm_dome_puts_total", "dpm_dome_fs_free_bytes",
        "dpm_dome_fs_size_bytes", "dpm_dome_fs_enabled", "dpm_dome_fs_events_total",
        "dpm_dome_journald_suppressed_lines_total",
        "dpmstream_lines_total", "dpmstream_event_lag_seconds")),
}


def test_there_is_a_dashboard_for_the_legacy_daemons_and_one_for_dome():
    assert [p.name for p in DASHBOARDS] == sorted(EXPECTED)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_has_stable_uid_and_multi_value_variables(path):
    dash = json.loads(path.read_text())
    uid, wanted, _ = EXPECTED[path.name]
    assert dash["uid"] == uid
    vars_ = variables(dash)
    for name, metric_label in wanted.items():
        query = vars_[name]["query"]["query"]
        assert re.fullmatch(rf"label_values\(dpm_\w+(\{{.*\}})?, {metric_label}\)", query), query
        assert vars_[name]["multi"] and vars_[name]["includeAll"]
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_covers_the_required_panels(path):
    dash = json.loads(path.read_text())
    exprs = " ".join(t["expr"] for _, t in targets(dash))
    kinds = {p["type"] for p in panels(dash)}
    assert "heatmap" in kinds
    for needle in EXPECTED[path.name][2]:
        assert needle in exprs, f"no panel queries {needle}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    live = start_live_stack(tmp_path_factory.mktemp("dash"))
    yield live
    live.stop()


def _label_values(prom_url: str, query: str, resolved: dict[str, str]) -> list[str]:
    """Grafana's label_values(metric{sel}, label) through the Prometheus series API."""
    m = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
    assert m, query
    selector, label = substitute(m.group(1), resolved), m.group(2)
    url = f"{prom_url}/api/v1/series?" + urllib.parse.urlencode({"match[]": selector})
    series = json.loads(urllib.request.urlopen(url, timeout=10).read())["data"]
    return sorted({s[label] for s in series if label in s})


def _resolve_variables(prom_url: str, dash: dict) -> dict[str, str]:
    """Each query variable as Grafana sends 'All' of a multi-value: (v1|v2|...)."""
    resolved: dict[str, str] = {}
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        values = _label_values(prom_url, var["query"]["query"], resolved)
        assert values, f"template variable {var['name']} has no values"
        # regex-escaped, then escaped again for the PromQL string literal (as Grafana does)
        resolved[var["name"]] = "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in values) + ")"
    return resolved


@pytest.mark.services  # the `stack` fixture starts Prometheus and `dpmstream run`
def test_every_overview_panel_query_is_valid_promql_and_returns_data(stack, tmp_path):
    dash = json.loads((REPO / "dashboards" / "dpm-overview.json").read_text())
    resolved = _resolve_variables(stack.prometheus.url, dash)
    assert "dpmhead01" in resolved["host"]
    assert resolved["op"] == "(get|put)"
    assert_every_panel_has_data(stack.prometheus, dash, resolved, tmp_path)


@pytest.fixture(scope="module")
def dome_stack(tmp_path_factory):
    """A DOME site whose first disk node goes down in the second half (its filesystems
    disabled, then enabled again), with RFC 3339 stamps (call durations exported), in
    /var/log/messages (where journald's notice of the head's gap shows)."""
    live = start_dome_stack(tmp_path_factory.mktemp("dome-dash"), sim_args=(
        "--duration", "600", "--rate", "3", "--disk-down-at", "330", "--disk-down-s", "200",
        "--envelope", "messages"))
    yield live
    live.stop()


@pytest.mark.services  # the `dome_stack` fixture starts Prometheus and `dpmstream run`
def test_every_dome_panel_query_is_valid_promql_and_returns_data(dome_stack, tmp_path):
    dash = json.loads((REPO / "dashboards" / "dpm-dome.json").read_text())
    resolved = _resolve_variables(dome_stack.prometheus.url, dash)
    assert "dpmhead01" in resolved["host"] and "dpmdisk01" in resolved["host"]
    assert "dome_put" in resolved["command"] and "dome_putdone" in resolved["command"]
    assert "dpmdisk01" in resolved["server"]
    assert_every_panel_has_data(dome_stack.prometheus, dash, resolved, tmp_path)


def assert_every_panel_has_data(prometheus, dash: dict, resolved: dict[str, str], tmp_path) -> None:
    """Every target of every panel, its variables resolved as Grafana would: valid PromQL
    (promtool) and at least one number (not NaN) from the real Prometheus."""
    queries = [(panel["title"], target["refId"], substitute(target["expr"], resolved))
               for panel, target in targets(dash)]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, (_, _, expr) in enumerate(queries)]}]}
    rule_file = tmp_path / "dashboard-rules.yml"
    rule_file.write_text(json.dumps(rules, indent=1))  # JSON is YAML
    check = subprocess.run(["promtool", "check", "rules", str(rule_file)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    empty = []
    for title, ref, expr in queries:
        rows = prometheus.query(expr)
        values = [float(r["value"][1]) for r in rows]
        if not any(not math.isnan(v) for v in values):
            empty.append(f"{title} [{ref}]: {expr} -> {values}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
