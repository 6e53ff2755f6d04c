"""The reassembly settings: its caps and timeouts, one value, checked once as it is made.

A command builds it from its options (dpmstream/commands/common.reassembly_settings, the
options of add_reassembly_options); the Pipeline, the live feed, the Kafka worker's
partitions, the report and `whatif` take it as it is. Its defaults are the options'.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReassemblySettings:
    """The reassembler's limits, as the commands' options set them."""

    timeout_s: float = 3600          # event time after which a request with no end is emitted
    max_in_flight: int = 1_000_000   # open requests (per pipeline) before the least active goes
    max_threads: int = 100_000       # daemon threads tracked before the least active is dropped
    grace_s: float = 60              # a restarted daemon's old process may stay silent this long
    head_aliases: tuple[str, ...] = ()  # other names of the head node as name-server clients see it

    def __post_init__(self) -> None:
        """Refuse settings that cannot work, with a message naming the option."""
        if not self.timeout_s > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {self.timeout_s:g}")
        if self.max_in_flight < 1:
            raise ValueError(f"max-in-flight must be >= 1, not {self.max_in_flight}")
        if self.max_threads < 1:
            raise ValueError(f"max-threads must be >= 1, not {self.max_threads}")
        if self.grace_s < 0:
            raise ValueError(f"grace must be >= 0 seconds, not {self.grace_s:g}")
        object.__setattr__(self, "head_aliases", tuple(self.head_aliases))

    @property
    def timeout_ms(self) -> int:
        return int(self.timeout_s * 1000)

    @property
    def grace_ms(self) -> int:
        return int(self.grace_s * 1000)
