"""Kafka connection settings shared by the worker and the replay publisher.

Broker URLs as Faust spells them (`kafka://HOST:PORT`, several separated by commas or
semicolons). Security: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL; secrets come
from a file or the environment, never from the command line, and are never logged
(KafkaSecurity's repr hides the password).
"""

from __future__ import annotations

import argparse
import os

from dpmstream.parsers.plain import Value

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

ENV_USERNAME = "DPMSTREAM_KAFKA_USERNAME"
ENV_PASSWORD = "DPMSTREAM_KAFKA_PASSWORD"
ENV_PASSWORD_FILE = "DPMSTREAM_KAFKA_PASSWORD_FILE"
ENV_CAFILE = "DPMSTREAM_KAFKA_CAFILE"


class KafkaConfigError(ValueError):
    """A broker URL or security setting that cannot work (clear message, exit 2)."""


def parse_broker(url: str) -> str:
    """'kafka://h1:9092,kafka://h2:9092' -> 'h1:9092,h2:9092' (aiokafka bootstrap list)."""
    servers = []
    for part in url.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        scheme, sep, rest = part.partition("://")
        if sep and scheme != "kafka":
            raise KafkaConfigError(f"broker {part!r}: only kafka:// URLs are supported")
        hostport = (rest if sep else part).rstrip("/")
        host, colon, port = hostport.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise KafkaConfigError(f"broker {part!r}: expected kafka://HOST:PORT")
        servers.append(f"{host}:{port}")
    if not servers:
        raise KafkaConfigError("no broker given (expected kafka://HOST:PORT)")
    return ",".join(servers)


class KafkaSecurity(Value):
    __slots__ = FIELDS = ("protocol", "sasl_mechanism", "username", "password", "cafile")

    def __init__(self, protocol: str = "PLAINTEXT", sasl_mechanism: str | None = None,
                 username: str | None = None, password: str | None = None,
                 cafile: str | None = None):
        self.protocol, self.sasl_mechanism = protocol, sasl_mechanism
        self.username, self.password, self.cafile = username, password, cafile

    def __repr__(self) -> str:  # no secret in logs or tracebacks
        hidden = "***" if self.password else None
        return (f"KafkaSecurity(protocol={self.protocol!r}, sasl_mechanism={self.sasl_mechanism!r}, "
                f"username={self.username!r}, password={hidden!r}, cafile={self.cafile!r})")

    def validate(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise KafkaConfigError(f"security protocol {self.protocol!r}: one of {', '.join(PROTOCOLS)}")
        if self.protocol.startswith("SASL"):
            if self.sasl_mechanism not in MECHANISMS:
                raise KafkaConfigError(f"--sasl-mechanism: one of {', '.join(MECHANISMS)}")
            if not self.username or self.password is None:
                raise KafkaConfigError(
                    f"{self.protocol} needs a user name and a password (--sasl-username or "
                    f"${ENV_USERNAME}; --sasl-password-file, ${ENV_PASSWORD_FILE} or ${ENV_PASSWORD})")
        if self.cafile and not os.path.isfile(self.cafile):
            raise KafkaConfigError(f"CA file {self.cafile}: not found")

    def client_kwargs(self) -> dict:
        """Keyword arguments for aiokafka clients (producer, consumer, admin)."""
        self.validate()
        kwargs: dict = {"security_protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context
            kwargs["ssl_context"] = create_ssl_context(cafile=self.cafile)
        if self.protocol.startswith("SASL"):
            kwargs.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                          sasl_plain_password=self.password)
        return kwargs


    def librdkafka_config(self) -> dict:
        """The same settings in librdkafka's names (confluent-kafka: the worker's lines
        consumer). Without --ssl-cafile, librdkafka's own system CA locations."""
        self.validate()
        config: dict = {"security.protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL") and self.cafile:
            config["ssl.ca.location"] = self.cafile
        if self.protocol.startswith("SASL"):
            config.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        return config


def add_kafka_arguments(p: argparse.ArgumentParser, *, broker_flag: str | None = "--broker",
                        title: str = "Kafka connection") -> None:
    """The Kafka connection options, in one group: --broker (unless the command names the
    broker itself, as `replay --to-kafka URL` does) and the security options. Every
    command that talks to Kafka declares them through here, and checks them with
    security_from_args (exit 2 on a setting that cannot work)."""
    g = p.add_argument_group(title)
    if broker_flag:
        g.add_argument(broker_flag, required=True, metavar="kafka://HOST:PORT",
                       help="Kafka bootstrap broker(s), comma-separated")
    g.add_argument("--security-protocol", choices=PROTOCOLS, default="PLAINTEXT",
                   help="how to talk to the brokers (default: %(default)s)")
    g.add_argument("--sasl-mechanism", choices=MECHANISMS, default=None,
                   help="SASL mechanism (with SASL_PLAINTEXT or SASL_SSL; default: PLAIN)")
    g.add_argument("--sasl-username", metavar="NAME",
                   help=f"SASL user name (or ${ENV_USERNAME})")
    g.add_argument("--sasl-password-file", metavar="FILE",
                   help=f"file holding the SASL password (or ${ENV_PASSWORD_FILE}, or the "
                        f"password itself in ${ENV_PASSWORD}); never on the command line")
    g.add_argument("--ssl-cafile", metavar="FILE",
                   help=f"CA bundle to verify the brokers (with SSL or SASL_SSL; or "
                        f"${ENV_CAFILE}; default: system CAs)")


# Options that only mean something under some protocols: given under another one they
# would be silently ignored, so they are refused instead.
_NEEDS = {
    "sasl_mechanism": ("--sasl-mechanism", ("SASL_PLAINTEXT", "SASL_SSL")),
    "sasl_username": ("--sasl-username", ("SASL_PLAINTEXT", "SASL_SSL")),
    "sasl_password_file": ("--sasl-password-file", ("SASL_PLAINTEXT", "SASL_SSL")),
    "ssl_cafile": ("--ssl-cafile", ("SSL", "SASL_SSL")),
}


def kafka_options_given(args) -> list[str]:
    """The Kafka security options set on the command line (their flags)."""
    given = [flag for dest, (flag, _) in _NEEDS.items() if getattr(args, dest, None)]
    if getattr(args, "security_protocol", "PLAINTEXT") != "PLAINTEXT":
        given.insert(0, "--security-protocol")
    return given


def check_protocol_options(args) -> None:
    """Refuse a SASL or TLS option the chosen --security-protocol would ignore."""
    protocol = getattr(args, "security_protocol", None) or "PLAINTEXT"
    for dest, (flag, protocols) in _NEEDS.items():
        if getattr(args, dest, None) and protocol not in protocols:
            raise KafkaConfigError(
                f"{flag} needs --security-protocol {' or '.join(protocols)} "
                f"(it is {protocol}, which would ignore it)")


def security_from_args(args, environ=None) -> KafkaSecurity:
    """The security settings from parsed options, falling back on the environment."""
    env = os.environ if environ is None else environ
    check_protocol_options(args)
    password = None
    pw_file = getattr(args, "sasl_password_file", None) or env.get(ENV_PASSWORD_FILE)
    if pw_file:
        try:
            with open(pw_file, encoding="utf-8") as fh:
                password = fh.read().rstrip("\r\n")
        except OSError as exc:
            raise KafkaConfigError(f"SASL password file {pw_file}: {exc.strerror}") from None
    elif env.get(ENV_PASSWORD) is not None:
        password = env[ENV_PASSWORD]
    sec = KafkaSecurity(
        protocol=getattr(args, "security_protocol", None) or "PLAINTEXT",
        sasl_mechanism=getattr(args, "sasl_mechanism", None),
        username=getattr(args, "sasl_username", None) or env.get(ENV_USERNAME),
        password=password,
        cafile=getattr(args, "ssl_cafile", None) or env.get(ENV_CAFILE),
    )
    if sec.protocol.startswith("SASL") and sec.sasl_mechanism is None:
        sec.sasl_mechanism = "PLAIN"
    sec.validate()
    return sec
