"""rsyslog shipping DPM log files to Kafka with the project's config (rsyslog/).

`render_config()` turns rsyslog/dpmstream.conf.in into a drop-in for a head node (the
shipped rsyslog/dpmstream.conf is its rendering with the head-node defaults):

    python -m dpmstream.commands.stack.rsyslog --broker kafka01:9092 \\
        > /etc/rsyslog.d/dpmstream.conf

A DOME node (`--dome`, rsyslog/dpmstream-dome.conf) logs through syslog(3), not to files
of its own: the same template then also copies dmlite's syslog messages to a file of
RFC 3339 microsecond stamps (a `SyslogCopy`), and follows that file like any other, so
each line keeps a path and offset (docs/dome.md, "Shipping a DOME node to Kafka").

`RsyslogShipper` runs a private rsyslogd with that same drop-in, following given files:
its own config, work directory (imfile state, disk queue), pid file and log, and no
system input (no /dev/log socket, no kernel log).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from dpmstream.commands.stack.process import ManagedProcess, ServiceError

REPO = Path(__file__).resolve().parents[3]
TEMPLATE = REPO / "rsyslog" / "dpmstream.conf.in"
SHIPPED = REPO / "rsyslog" / "dpmstream.conf"
SHIPPED_DOME = REPO / "rsyslog" / "dpmstream-dome.conf"

HEAD_NODE_FILES = ("/var/log/dpm/log", "/var/log/dpns/log", "/var/log/srmv2.2/log")
DEFAULT_TOPIC = "dpm.lines"
# librdkafka settings (omkafka confParam). lz4: the worker's consumer decodes it.
# Idempotence: a batch retried while a broker restarts cannot land after the batch
# behind it (the worker takes a line below a file's high-water offset for a duplicate).
# No message timeout: librdkafka holds undelivered lines, in order, for as long as the
# outage lasts, instead of failing them back to rsyslog's queue behind newer ones.
DEFAULT_CONF_PARAMS = ("compression.codec=lz4", "socket.keepalive.enable=true",
                       "enable.idempotence=true", "message.timeout.ms=0")


class SyslogCopy(NamedTuple):
    """Syslog messages whose text holds `contains`, written by rsyslog to `file` with
    RSYSLOG_FileFormat (RFC 3339 stamp with microseconds and the year), then followed like
    any log file: the file gives each line the path and offset that let the worker drop a
    line delivered twice, which a message from a socket has not."""
    contains: str
    file: str


# dmlite's messages, selected as its packaged rsyslog snippet (20-log-dmlite.conf) selects
# them for /var/log/dmlite/dmlite.log, into a file of their own beside it.
DOME_COPY = SyslogCopy(" dmlite ", "/var/log/dmlite/dmlite-rfc3339.log")


def _tag(path: str) -> str:
    """imfile tag: the daemon's directory (/var/log/dpns/log -> dpns), else the file stem."""
    p = Path(path)
    name = p.parent.name if p.name == "log" and p.parent.name else p.stem
    return "".join(c for c in name if c.isalnum() or c in "._-")[:30] or "dpm"


def _quoted(value: str, what: str) -> str:
    if any(c in value for c in '"\\\n\r'):
        raise ValueError(f"{what} {value!r} holds a quote, backslash or newline")
    return f'"{value}"'


def _copy_actions(copies: Sequence[SyslogCopy]) -> str:
    """The default ruleset's actions writing each copy (where the system's syslog
    messages arrive); they do not stop the message, so the site's own rules still see it."""
    if not copies:
        return ""
    blocks = [
        f'if ($msg contains {_quoted(c.contains, "message filter")}) then {{\n'
        f'    action(type="omfile" name="dpmstream_copy_{i}" file={_quoted(c.file, "copy file")}\n'
        f'           template="RSYSLOG_FileFormat")\n'
        f'}}\n'
        for i, c in enumerate(copies, 1)
    ]
    return ("# Syslog messages copied to files with RFC 3339 microsecond stamps (timereported:\n"
            "# the time rsyslog's system input stamped, microseconds under imuxsock and\n"
            "# imjournal), each file followed below like any log: path and offset name a line.\n"
            + "".join(blocks) + "\n")


def render_config(files: Sequence[str] = HEAD_NODE_FILES, brokers: Sequence[str] = ("localhost:9092",),
                  topic: str = DEFAULT_TOPIC, resume_interval: int = 10,
                  queue_max_disk: str = "1g",
                  failed_msg_file: str = "/var/spool/rsyslog/dpmstream-kafka-failed.data",
                  conf_params: Sequence[str] = DEFAULT_CONF_PARAMS,
                  syslog_copies: Sequence[SyslogCopy] = (), site_key: str | None = None) -> str:
    """The drop-in config for these files (and the files of `syslog_copies`), brokers and topic.
    site_key: the record key of every line (a DOME site's nodes in one partition), else
    the node's host name."""
    files = [*files, *(c.file for c in syslog_copies)]
    if not files:
        raise ValueError("no log file to follow")
    if not brokers:
        raise ValueError("no Kafka broker given")
    inputs = "\n".join(
        f'input(type="imfile" file={_quoted(str(f), "log file")} tag="{_tag(str(f))}:"\n'
        f'      ruleset="dpmstream" addMetadata="on" reopenOnTruncate="on"'
        f' persistStateInterval="1000")'
        for f in files
    )
    values = {
        "@SYSLOG_COPIES@\n": _copy_actions(syslog_copies),
        "@INPUTS@": inputs,
        "@BROKERS@": ", ".join(_quoted(b, "broker") for b in brokers),
        "@TOPIC@": topic,
        "@KEY@": "$hostname" if site_key is None else _quoted(site_key, "site key"),
        "@RESUME_INTERVAL@": str(int(resume_interval)),
        "@QUEUE_MAX_DISK@": queue_max_disk,
        "@FAILED_MSG_FILE@": failed_msg_file,
        "@CONF_PARAMS@": ", ".join(_quoted(c, "librdkafka setting") for c in conf_params),
    }
    _quoted(topic, "topic")
    _quoted(failed_msg_file, "failed message file")
    text = TEMPLATE.read_text()
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def rsyslogd_binary() -> str:
    path = shutil.which("rsyslogd") or shutil.which("rsyslogd", path="/usr/sbin:/sbin")
    if path is None:
        raise ServiceError("rsyslogd not found: run `make install-system`")
    return path


class RsyslogShipper:
    """A private rsyslogd following `files` and shipping them to Kafka.

    hostname: the `host` field and message key (rsyslog's localHostname); default the
    machine's name as rsyslog sees it. resume_interval: seconds between retries of a
    broker that is down (tests use 1). extra_conf_params: more librdkafka settings.
    syslog_copies: syslog messages to copy to files and follow (a DOME node's dmlite lines).
    site_key: every record's key instead of the host name (a DOME site's nodes, one partition).
    syslog_socket: a private socket standing in for the system's /dev/log (imuxsock, no
    rate limit). keep_sent_stamps: take each message's own stamp (`ignoreTimestamp="off"`),
    so a test knows the time it sent; False: imuxsock's defaults, as on a node's /dev/log,
    the receive time with microseconds (syslog(3)'s own stamp has whole seconds).
    """

    def __init__(self, workdir: Path | str, files: Iterable[Path | str], brokers: Sequence[str] | str,
                 topic: str = DEFAULT_TOPIC, hostname: str | None = None, resume_interval: int = 1,
                 conf_params: Sequence[str] = DEFAULT_CONF_PARAMS,
                 extra_conf_params: Sequence[str] = ("reconnect.backoff.max.ms=1000",),
                 syslog_copies: Sequence[SyslogCopy] = (), syslog_socket: Path | str | None = None,
                 keep_sent_stamps: bool = True, site_key: str | None = None):
        self.workdir = Path(workdir).resolve()
        self.files = [Path(f).resolve() for f in files]
        self.syslog_copies = [c._replace(file=str(Path(c.file).resolve())) for c in syslog_copies]
        self.syslog_socket = None if syslog_socket is None else Path(syslog_socket).resolve()
        self.keep_sent_stamps = keep_sent_stamps
        self.site_key = site_key
        self.brokers = [brokers] if isinstance(brokers, str) else list(brokers)
        self.topic = topic
        self.hostname = hostname
        self.resume_interval = resume_interval
        self.conf_params = list(conf_params) + list(extra_conf_params)
        self.spool = self.workdir / "spool"
        self.main_conf = self.workdir / "rsyslog.conf"
        self.dropin = self.workdir / "dpmstream.conf"
        self.daemon_log = self.workdir / "rsyslogd.log"
        self.process = ManagedProcess(
            "rsyslog", self.workdir / "rsyslogd.pid", self.workdir / "stdout.log",
            marker=str(self.main_conf), other_logs=[self.daemon_log],
        )

    @property
    def running(self) -> bool:
        return self.process.pid() is not None

    @property
    def failed_msg_file(self) -> Path:
        return self.spool / "dpmstream-kafka-failed.data"

    def write_config(self) -> None:
        self.spool.mkdir(parents=True, exist_ok=True)
        self.dropin.write_text(render_config(
            [str(f) for f in self.files], self.brokers, self.topic, self.resume_interval,
            queue_max_disk="256m", failed_msg_file=str(self.failed_msg_file),
            conf_params=self.conf_params, syslog_copies=self.syslog_copies,
            site_key=self.site_key))
        host = f' localHostname={_quoted(self.hostname, "host name")}' if self.hostname else ""
        stamps = ' ignoreTimestamp="off" useSysTimeStamp="off"' if self.keep_sent_stamps else ""
        socket = "" if self.syslog_socket is None else (
            'module(load="imuxsock" sysSock.use="off")\n'
            f'input(type="imuxsock" socket={_quoted(str(self.syslog_socket), "socket")}{stamps}'
            ' rateLimit.interval="0")\n')
        # The main config stands in for /etc/rsyslog.conf: private work directory, no
        # system inputs (the private socket instead, if any), rsyslogd's own messages to a
        # file (not to the journal), then the drop-in.
        self.main_conf.write_text(
            f'global(workDirectory="{self.spool}" processInternalMessages="on"{host})\n'
            f'{socket}'
            f'*.* action(type="omfile" file="{self.daemon_log}")\n'
            f'include(file="{self.dropin}")\n'
        )

    def start(self, timeout: float = 20.0) -> float:
        """Validate the config, start rsyslogd; ready once it logged its start."""
        if self.running:
            return 0.0
        for f in [*self.files, *(Path(c.file) for c in self.syslog_copies)]:
            # imfile watches a file's directory for it to appear: the directory must exist.
            f.parent.mkdir(parents=True, exist_ok=True)
        self.write_config()
        binary = rsyslogd_binary()
        check = subprocess.run([binary, "-N1", "-f", str(self.main_conf)], capture_output=True,
                               text=True, timeout=60, stdin=subprocess.DEVNULL)
        if check.returncode != 0:
            raise ServiceError(f"rsyslog: config {self.main_conf} rejected:\n"
                               f"{(check.stdout + check.stderr)[-3000:]}")
        starts = self._start_count()
        self.process.launch(
            [binary, "-n", "-f", str(self.main_conf), "-i", str(self.process.pid_file)],
            cwd=self.workdir, write_pid=False)
        return self.process.wait_ready(
            lambda: self._start_count() > starts and self.process.pid() is not None,
            timeout, "started")

    def stop(self, timeout: float = 20.0) -> bool:
        """Stop this rsyslogd only; it saves its queue and unsent messages on the way out."""
        return self.process.stop(timeout=timeout)

    def restart(self, timeout: float = 20.0) -> float:
        self.stop()
        return self.start(timeout)

    def _start_count(self) -> int:
        # rsyslogd logs '[origin software="rsyslogd" ...] start' once its inputs run.
        try:
            text = self.daemon_log.read_text(errors="replace")
        except OSError:
            return 0
        return text.count('x-info="https://www.rsyslog.com"] start')


def main(argv: list[str] | None = None) -> int:
    """Print the drop-in (a DPM head node's, or a DOME node's) for the given brokers, topic and files."""
    parser = argparse.ArgumentParser(
        prog="python -m dpmstream.commands.stack.rsyslog",
        description="Print dpmstream's rsyslog drop-in (imfile -> omkafka) for a head node.")
    parser.add_argument("--broker", action="append", dest="brokers", metavar="HOST:PORT",
                        help="Kafka bootstrap broker (repeatable; default: localhost:9092)")
    parser.add_argument("--lines-topic", default=DEFAULT_TOPIC, metavar="TOPIC",
                        help="raw-lines topic (default: %(default)s)")
    parser.add_argument("--topic", dest="lines_topic", help=argparse.SUPPRESS)  # old spelling
    parser.add_argument("--file", action="append", dest="files", metavar="PATH",
                        help="log file to follow (repeatable; default: the DPM, DPNS and SRM logs, "
                             "none with --dome)")
    parser.add_argument("--dome", action="store_true",
                        help="a DOME node: copy dmlite's syslog messages (those holding "
                             f"'{DOME_COPY.contains.strip()}') to {DOME_COPY.file} with microsecond "
                             "stamps, and follow it")
    parser.add_argument("--resume-interval", type=int, default=10,
                        help="seconds between retries while Kafka is down (default: %(default)s)")
    parser.add_argument("--queue-max-disk", default="1g",
                        help="disk space for the queue while Kafka is down (default: %(default)s)")
    parser.add_argument("--failed-msg-file", default="/var/spool/rsyslog/dpmstream-kafka-failed.data")
    parser.add_argument("--conf-param", action="append", dest="conf_params", metavar="KEY=VALUE",
                        help="librdkafka setting, added after the defaults (a later one wins; "
                             f"repeatable; default: {' '.join(DEFAULT_CONF_PARAMS)})")
    parser.add_argument("--site-key", metavar="NAME",
                        help="the record key of every line instead of the node's host name: "
                             "the same NAME on a DOME site's head and disk nodes puts their "
                             "lines in one partition, where a put is joined across them "
                             "(default: the host name)")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(render_config(
            args.files or (() if args.dome else HEAD_NODE_FILES), args.brokers or ["localhost:9092"],
            args.lines_topic, args.resume_interval, args.queue_max_disk, args.failed_msg_file,
            [*DEFAULT_CONF_PARAMS, *(args.conf_params or ())],
            syslog_copies=(DOME_COPY,) if args.dome else (), site_key=args.site_key))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
