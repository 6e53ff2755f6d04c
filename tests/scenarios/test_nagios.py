"""A private nagios4 runs check_dpm (with the shipped command definitions) against a real
Prometheus fed by a real `dpmstream run`, and against a log file, and records OK and
CRITICAL services with their perfdata in its status file and perfdata file.

Nagios runs plugins as nagios_user: the probe is installed for that user outside /root
as a site would (the probe, the domain and the profiles, and nagiosplugin, copied into a
folder it can read, without dpmstream.streams, run by the system python3 through a
wrapper script), in a work folder owned by that user.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nagiosplugin
import pytest

from tests.metrics_stack import simulate, start_live_stack

pytestmark = pytest.mark.services  # nagios4 and a Prometheus started by the test

REPO = Path(__file__).resolve().parents[2]
NAGIOS = shutil.which("nagios4") or "/usr/sbin/nagios4"
SYSTEM_PYTHON = "/usr/bin/python3"


def _nagios_user() -> tuple[str, str]:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    pwd.getpwnam("nagios")  # created by the nagios4-core package
    return "nagios", "nagios"


def install_probe(root: Path) -> Path:
    """The probe as a site would install it for nagios_user: code it can read, a wrapper."""
    lib = root / "lib"
    pkg = lib / "dpmstream"
    shutil.copytree(REPO / "dpmstream", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    # What the probe needs, and nothing of dpmstream.streams: a site installs no pipeline.
    for folder, name in (("probes", "probes"), ("parsers", "parsers"),
                         ("regex_profiles", "regex_profiles")):
        shutil.copytree(REPO / folder, pkg / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(nagiosplugin.__file__).parent, lib / "nagiosplugin",
                    ignore=shutil.ignore_patterns("__pycache__"))
    plugins = root / "plugins"
    plugins.mkdir()
    wrapper = plugins / "check_dpm"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={lib} exec {SYSTEM_PYTHON} -m dpmstream.probes.check_dpm \"$@\"\n")
    wrapper.chmod(0o755)
    return plugins


def write_nagios_config(root: Path, plugins: Path, prom_url: str, user: str, group: str,
                        log: Path, dome_logs: str) -> Path:
    (root / "spool").mkdir()
    (root / "rw").mkdir()
    (root / "resource.cfg").write_text(f"$USER1$={plugins}\n")
    shutil.copy(REPO / "probes/nagios/dpmstream-commands.cfg", root / "commands.cfg")
    (root / "objects.cfg").write_text(f"""
define timeperiod {{
    timeperiod_name 24x7
    alias           always
    sunday 00:00-24:00
    monday 00:00-24:00
    tuesday 00:00-24:00
    wednesday 00:00-24:00
    thursday 00:00-24:00
    friday 00:00-24:00
    saturday 00:00-24:00
}}
define contact {{
    contact_name                  nobody
    host_notifications_enabled    0
    service_notifications_enabled 0
    host_notification_period      24x7
    service_notification_period   24x7
    host_notification_options     n
    service_notification_options  n
    host_notification_commands    dummy
    service_notification_commands dummy
}}
define command {{
    command_name dummy
    command_line /bin/true
}}
define host {{
    host_name             dpmhead01
    address               127.0.0.1
    max_check_attempts    1
    check_period          24x7
    contacts              nobody
    notification_interval 0
    notification_period   24x7
    active_checks_enabled 0
}}
define service {{
    name                  dpm-service
    register              0
    max_check_attempts    1
    check_interval        2
    retry_interval        2
    check_period          24x7
    contacts              nobody
    notification_interval 0
    notification_period   24x7
    notifications_enabled 0
}}
define service {{
    use                 dpm-service
    host_name           dpmhead01
    service_description DPM phases OK
    check_command       check_dpm_prometheus!{prom_url}!2m!-w proc:p95=~:100 -c total:p99=~:3600 -w failed_rate=0.9
}}
define service {{
    use                 dpm-service
    host_name           dpmhead01
    service_description DPM proc CRITICAL
    check_command       check_dpm_prometheus!{prom_url}!2m!-w proc:p95=~:0.0005 -c proc:p95=~:0.001
}}
define service {{
    use                 dpm-service
    host_name           dpmhead01
    service_description DPM log
    check_command       check_dpm_log!{log}!5m!--tz Europe/Zurich -w failed_rate=0.9 -c total:p99=~:3600
}}
define service {{
    use                 dpm-service
    host_name           dpmhead01
    service_description DOME logs
    check_command       check_dpm_dome_log!{dome_logs}!5m!--tz Europe/Zurich --last-line-year 2017 --request-timeout 120 -c failed_rate=0.5 -w dome_error_rate=0.5
}}
""")
    cfg = root / "nagios.cfg"
    cfg.write_text(f"""
log_file={root}/nagios.log
cfg_file={root}/commands.cfg
cfg_file={root}/objects.cfg
resource_file={root}/resource.cfg
object_cache_file={root}/objects.cache
precached_object_file={root}/objects.precache
status_file={root}/status.dat
status_update_interval=1
nagios_user={user}
nagios_group={group}
check_external_commands=1
command_file={root}/rw/nagios.cmd
lock_file={root}/nagios.lock
temp_file={root}/nagios.tmp
temp_path={root}
check_result_path={root}/spool
check_result_reaper_frequency=1
retain_state_information=0
state_retention_file={root}/retention.dat
interval_length=1
service_inter_check_delay_method=n
max_service_check_spread=1
use_syslog=0
enable_notifications=0
execute_service_checks=1
execute_host_checks=0
process_performance_data=1
service_perfdata_file={root}/service-perfdata
service_perfdata_file_template=$SERVICEDESC$\\t$SERVICESTATEID$\\t$SERVICEOUTPUT$\\t$SERVICEPERFDATA$
service_perfdata_file_mode=a
service_perfdata_file_processing_interval=0
service_check_timeout=30
check_for_updates=0
illegal_macro_output_chars=`$&|'"
""")
    uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
    for path in [root, *root.rglob("*")]:
        os.chown(path, uid, gid)
    return cfg


def parse_status(path: Path) -> dict[str, dict[str, str]]:
    """servicestatus blocks of status.dat by service description."""
    services, block, kind = {}, {}, None
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.endswith("{"):
            kind, block = line[:-1].strip(), {}
        elif line == "}":
            if kind == "servicestatus":
                services[block.get("service_description")] = block
            kind = None
        elif kind and "=" in line:
            key, _, value = line.partition("=")
            block[key] = value
    return services


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    live = start_live_stack(tmp_path_factory.mktemp("nagios-stack"))
    yield live
    live.stop()


@pytest.fixture
def nagios_root():
    # Not under pytest's tmp (mode 700 under /tmp/pytest-of-root): nagios_user must enter it.
    root = Path(tempfile.mkdtemp(prefix="dpmstream-nagios-", dir="/tmp"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_nagios_records_ok_and_critical_with_perfdata(stack, nagios_root):
    user, group = _nagios_user()
    plugins = install_probe(nagios_root)
    log = nagios_root / "dpm.log"
    shutil.copy(f"{stack.sim_prefix}.log", log)
    # a DOME site's four logs, gathered in one folder, named to the probe by one glob
    dome = nagios_root / "dmlite"
    site = simulate(nagios_root / "sim" / "site", "--dome", "--duration", "300", "--rate", "3")
    dome.mkdir()
    for node in sorted(site.parent.glob("site.dpm*.log")):
        shutil.copy(node, dome / node.name.split(".")[1])
    os.chmod(dome, 0o755)
    cfg = write_nagios_config(nagios_root, plugins, stack.prometheus.url, user, group, log,
                              f"{dome}/dpm*")
    verify = subprocess.run([NAGIOS, "-v", str(cfg)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout[-3000:]

    proc = subprocess.Popen([NAGIOS, str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        status_file = nagios_root / "status.dat"
        wanted = {"DPM phases OK", "DPM proc CRITICAL", "DPM log", "DOME logs"}
        deadline = time.monotonic() + 90
        services = {}
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            if status_file.exists():
                services = parse_status(status_file)
                if all(services.get(s, {}).get("has_been_checked") == "1" for s in wanted):
                    break
            time.sleep(0.5)
        assert all(services.get(s, {}).get("has_been_checked") == "1" for s in wanted), \
            (nagios_root / "nagios.log").read_text()[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=20)

    ok, crit, from_log = services["DPM phases OK"], services["DPM proc CRITICAL"], services["DPM log"]
    # the site install (no dpmstream.streams) reads the log itself
    assert from_log["current_state"] == "0", from_log["plugin_output"]
    assert from_log["plugin_output"].startswith("DPM OK")
    assert "total_p99=" in from_log["performance_data"]
    assert ok["current_state"] == "0", ok["plugin_output"]
    assert ok["plugin_output"].startswith("DPM OK")
    assert "proc_p95=" in ok["performance_data"] and "total_p99=" in ok["performance_data"]
    assert crit["current_state"] == "2", crit["plugin_output"]
    assert crit["plugin_output"].startswith("DPM CRITICAL") and "proc_p95" in crit["plugin_output"]
    assert ";~:0.0005;~:0.001;" in crit["performance_data"]

    rows = [line.split("\t") for line in (nagios_root / "service-perfdata").read_text().splitlines()]
    states = {row[0]: row[1] for row in rows}
    assert states == {"DPM phases OK": "0", "DPM proc CRITICAL": "2", "DPM log": "0", "DOME logs": "0"}
    # the DOME site's logs through the glob: every node read, puts joined across nodes
    dome = services["DOME logs"]
    assert dome["plugin_output"].startswith("DOME OK - ") and "not seen" not in dome["plugin_output"]
    assert "partial=0" in dome["performance_data"] and "puts=" in dome["performance_data"]
    for row in rows:
        if row[0] == "DOME logs":
            continue
        perf = dict(item.split("=", 1) for item in row[3].split())
        for phase in ("auth", "request", "queue", "proc", "poll", "ready_wait", "transfer", "done", "total"):
            value = perf[f"{phase}_p95"].split(";")[0]
            assert value == "U" or value.endswith("s"), (phase, value)
