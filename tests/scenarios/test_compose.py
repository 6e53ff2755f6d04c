"""docker-compose.yml: valid for docker-compose, secrets required from the environment,
ports on 127.0.0.1, every mounted or built path present, and the configs it mounts valid
for the programs that read them (promtool, rsyslogd -N1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECRETS = {"KAFKA_SASL_PASSWORD": "kafka-s3cret", "GRAFANA_ADMIN_PASSWORD": "grafana-s3cret"}
SERVICES = {"kafka", "kafka-init", "rsyslog", "worker", "prometheus", "grafana"}


def compose(tmp_path, *args, env_extra=None, drop=()):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("KAFKA_", "GRAFANA_", "DPMSTREAM_", "DPM_", "DPNS_", "SRM_",
                                 "PROMETHEUS_", "WORKER_", "COMPOSE_")))}
    env.update({k: v for k, v in SECRETS.items() if k not in drop})
    env.update(env_extra or {})
    empty = tmp_path / "empty.env"  # no .env file of the developer's leaks in
    empty.write_text("")
    return subprocess.run(["docker-compose", "--env-file", str(empty), "-f", str(REPO / "docker-compose.yml"),
                           *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def compose_config(tmp_path, **kw) -> dict:
    """The resolved config, parsed with the YAML library docker-compose itself runs on."""
    done = compose(tmp_path, "config", **kw)
    assert done.returncode == 0, done.stderr
    parsed = subprocess.run(
        [_compose_python(), "-c", "import sys, json, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"],
        input=done.stdout, capture_output=True, text=True, check=True)
    return json.loads(parsed.stdout)


def _compose_python() -> str:
    first = Path(shutil.which("docker-compose")).read_text(errors="replace").splitlines()[0]
    return first[2:].split()[0] if first.startswith("#!") else sys.executable


@pytest.fixture(scope="module", autouse=True)
def _needs_compose():
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose not installed: run `make install-system`")


@pytest.fixture(scope="module")
def default_config(tmp_path_factory) -> dict:
    """compose_config with the secrets alone in the environment: resolved once for the
    tests that read it (each resolution is two process starts)."""
    return compose_config(tmp_path_factory.mktemp("compose"))


def test_compose_file_is_valid_with_the_required_secrets(tmp_path):
    done = compose(tmp_path, "config", "-q")
    assert done.returncode == 0, done.stderr
    services = compose(tmp_path, "config", "--services").stdout.split()
    assert set(services) == SERVICES


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_refuses_to_start_without_a_required_secret(tmp_path, missing):
    done = compose(tmp_path, "config", "-q", drop=(missing,))
    assert done.returncode != 0
    assert f"set {missing}" in done.stderr


def test_every_published_port_binds_loopback_by_default(default_config):
    config = default_config
    published = {}
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            host_ip, host_port, container = port.split(":") if isinstance(port, str) else (
                port["host_ip"], port["published"], port["target"])
            published[name] = (host_ip, int(host_port), container)
    assert {n: p[0] for n, p in published.items()} == {
        "kafka": "127.0.0.1", "worker": "127.0.0.1", "prometheus": "127.0.0.1", "grafana": "127.0.0.1"}
    assert {n: p[1] for n, p in published.items()} == {
        "kafka": 19092, "worker": 9108, "prometheus": 9090, "grafana": 3000}


def test_bind_address_and_ports_follow_the_environment(tmp_path):
    config = compose_config(tmp_path, env_extra={"DPMSTREAM_BIND": "10.0.0.5", "GRAFANA_PORT": "3300"})
    assert config["services"]["grafana"]["ports"] == ["10.0.0.5:3300:3000/tcp"]


def test_secrets_reach_the_services_through_the_environment_only(default_config):
    config = default_config
    services = config["services"]
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "grafana-s3cret"
    assert services["worker"]["environment"]["DPMSTREAM_KAFKA_PASSWORD"] == "kafka-s3cret"
    assert services["rsyslog"]["environment"]["KAFKA_SASL_PASSWORD"] == "kafka-s3cret"
    jaas = services["kafka"]["environment"]["KAFKA_LISTENER_NAME_CLIENT_PLAIN_SASL_JAAS_CONFIG"]
    assert 'user_dpmstream="kafka-s3cret"' in jaas
    for name, service in services.items():
        command = json.dumps(service.get("command", "")) + json.dumps(service.get("entrypoint", ""))
        assert "s3cret" not in command, f"{name} has a password on its command line"


def test_log_folders_are_mounted_read_only_and_configs_exist(tmp_path):
    config = compose_config(tmp_path, env_extra={"DPM_LOG_DIR": "/srv/logs/dpm"})
    volumes = config["services"]["rsyslog"]["volumes"]
    assert "/srv/logs/dpm:/var/log/dpm:ro" in volumes
    for name, service in config["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith(str(REPO)):
                assert Path(source).exists(), f"{name} mounts missing {source}"
        build = service.get("build")
        if build:
            assert (Path(build["context"]) / build.get("dockerfile", "Dockerfile")).is_file()


def test_prometheus_config_is_valid_and_scrapes_the_worker_port(default_config):
    config = default_config
    done = subprocess.run(["promtool", "check", "config", str(REPO / "deploy/prometheus/prometheus.yml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (REPO / "deploy/prometheus/prometheus.yml").read_text()
    assert '"worker:9108"' in text
    assert "--metrics-port=9108" in config["services"]["worker"]["command"]


def test_grafana_mounts_the_provisioning_the_dashboards_provider_reads(default_config):
    config = default_config
    volumes = config["services"]["grafana"]["volumes"]
    assert f"{REPO}/dashboards/provisioning:/etc/grafana/provisioning:ro" in volumes
    assert f"{REPO}/dashboards:/var/lib/grafana/dashboards/dpmstream:ro" in volumes
    provider = (REPO / "dashboards/provisioning/dashboards/dpmstream.yaml").read_text()
    assert "path: /var/lib/grafana/dashboards/dpmstream" in provider
    datasource = (REPO / "dashboards/provisioning/datasources/prometheus.yaml").read_text()
    assert "url: ${PROMETHEUS_URL}" in datasource
    assert config["services"]["grafana"]["environment"]["PROMETHEUS_URL"] == "http://prometheus:9090"


def test_rsyslog_entrypoint_renders_a_config_rsyslogd_accepts(tmp_path):
    out = tmp_path / "dpmstream.conf"
    env = dict(os.environ, DPMSTREAM_RSYSLOG_SRC=str(REPO / "rsyslog/dpmstream.conf"),
               DPMSTREAM_RSYSLOG_OUT=str(out), KAFKA_BROKERS="kafka:9092",
               KAFKA_SASL_USERNAME="dpmstream", KAFKA_SASL_PASSWORD="kafka-s3cret", KAFKA_TOPIC="dpm.lines")
    done = subprocess.run(["sh", str(REPO / "deploy/rsyslog/entrypoint.sh"), "--render"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    text = out.read_text()
    assert 'broker=["kafka:9092"]' in text
    assert '"sasl.password=kafka-s3cret"' in text and '"security.protocol=SASL_PLAINTEXT"' in text
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    # The container's own main config, with its paths moved into the test's folder: a
    # module the image's rsyslog lacks would fail here.
    main = tmp_path / "main.conf"
    shipped = (REPO / "deploy/rsyslog/rsyslog.conf").read_text()
    assert '"/var/lib/rsyslog"' in shipped and '"/run/dpmstream/dpmstream.conf"' in shipped
    main.write_text(shipped.replace("/var/lib/rsyslog", str(tmp_path))
                    .replace("/run/dpmstream/dpmstream.conf", str(out)))
    rsyslogd = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
    check = subprocess.run([rsyslogd, "-N1", "-f", str(main)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
