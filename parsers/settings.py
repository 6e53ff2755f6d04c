"""The reassembly settings: its caps and timeouts, one value, checked once as it is made.

A command builds it from its options (dpmstream/commands/common.reassembly_settings, the
options of add_reassembly_options); the Pipeline, the live feed, the Kafka worker's
partitions, the report and `whatif` take it as it is. Its defaults are the options'.
"""

from __future__ import annotations

from .plain import Frozen


class ReassemblySettings(Frozen):
    """The reassembler's limits, as the commands' options set them."""

    __slots__ = FIELDS = ("timeout_s", "max_in_flight", "max_threads", "grace_s", "head_aliases")

    def __init__(self, timeout_s: float = 3600, max_in_flight: int = 1_000_000,
                 max_threads: int = 100_000, grace_s: float = 60, head_aliases: tuple[str, ...] = ()):
        """Refuse settings that cannot work, with a message naming the option.

        timeout_s: event time after which a request with no end is emitted;
        max_in_flight: open requests (per pipeline) before the least active goes;
        max_threads: daemon threads tracked before the least active is dropped;
        grace_s: a restarted daemon's old process may stay silent this long;
        head_aliases: other names of the head node as name-server clients see it."""
        if not timeout_s > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout_s:g}")
        if max_in_flight < 1:
            raise ValueError(f"max-in-flight must be >= 1, not {max_in_flight}")
        if max_threads < 1:
            raise ValueError(f"max-threads must be >= 1, not {max_threads}")
        if grace_s < 0:
            raise ValueError(f"grace must be >= 0 seconds, not {grace_s:g}")
        put = object.__setattr__
        put(self, "timeout_s", timeout_s)
        put(self, "max_in_flight", max_in_flight)
        put(self, "max_threads", max_threads)
        put(self, "grace_s", grace_s)
        put(self, "head_aliases", tuple(head_aliases))

    @property
    def timeout_ms(self) -> int:
        return int(self.timeout_s * 1000)

    @property
    def grace_ms(self) -> int:
        return int(self.grace_s * 1000)
