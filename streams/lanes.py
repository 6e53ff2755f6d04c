"""Replay's reading order: the files of different daemons side by side, in event time.

The name-server calls of a DPM request are joined to it within a few seconds of event
time (parsers/linking.py), so a DPNS log read after the whole DPM log would come too
late. Inputs are grouped into lanes, one per daemon (detected from a file's first lines);
the files of a lane are read one after another, in the order given; the lanes are fed
side by side in event time by the domain's rule (parsers/side_by_side.py, `STEP_MS`).
"""

from __future__ import annotations

from collections.abc import Callable

from dpmstream.parsers.dome_profiles import DomeProfile, detect_dome_profile, first_host
from dpmstream.parsers.profiles import Profile, detect_profile
# STEP_MS is re-exported: callers of the lanes read the step here too
from dpmstream.parsers.side_by_side import STEP_MS, ChunkLane, feed_side_by_side  # noqa: F401
from dpmstream.streams.inputs import HEAD_LINES, InputError

DETECT_LINES = HEAD_LINES


class Lane(ChunkLane):
    """One daemon's inputs. `open_input(inp)` -> (source, iterator of lists of lines) or None
    (the input could not be opened: reported by the caller, the lane goes on)."""

    def __init__(self, name: str, inputs: list, open_input: Callable):
        super().__init__()
        self.name = name
        self.inputs = list(inputs)
        self.open_input = open_input
        # id(input) -> the profile it was recognised by (or the forced one; None: none
        # recognised it), given to its source: its daemon is not detected again, and it is
        # read in event time from its first line, not after a detection's first 200 (a DOME
        # disk node's putdone read half a minute before the head's put would be an
        # orphan: docs/dome.md).
        self.profiles: dict[int, Profile | DomeProfile | None] = {}
        self.done = False

    def next_input(self) -> bool:
        while self.inputs:
            opened = self.open_input(self.inputs.pop(0))
            if opened is not None:
                self.src, self.lines = opened
                self.chunk, self.at = None, 0
                return True
        self.done = True
        return False


# `dome_profiles` below: a callable giving the DOME profiles to try on a head no DPM
# profile reads (none: the driver takes no DOME records). It is called only then: compiling
# the DOME profiles' regexes was a fifth of a DPM log's replay start-up.
NO_DOME: Callable[[], list[DomeProfile]] = list


def daemon_of(first_lines: list[bytes], profiles: list[Profile], forced,
              dome_profiles: Callable[[], list[DomeProfile]] = NO_DOME) -> str:
    """The lane of an input from its first lines: its daemon ("?" when no profile
    recognises them), or for a DOME log `dome@NODE` (each node's files one lane, the
    nodes side by side: the put on the head and its putdone on a disk node meet)."""
    return recognise(first_lines, profiles, forced, dome_profiles)[0]


def recognise(first_lines, profiles, forced, dome_profiles) -> tuple[str, DomeProfile | None]:
    """(daemon_of's lane name, the DOME profile when the input is a DOME log): what a
    driver reading a DOME log in event time gives its source (lanes, `run`'s files)."""
    name, profile = recognise_profile(first_lines, profiles, forced, dome_profiles)
    return name, profile if isinstance(profile, DomeProfile) else None


def recognise_profile(first_lines, profiles, forced, dome_profiles) -> tuple[str, Profile | DomeProfile | None]:
    """(daemon_of's lane name, the profile the lines are read with: `forced`, or the one
    recognising them, or None)."""
    if forced is not None and not isinstance(forced, DomeProfile):
        return forced.daemon, forced
    text = [line.decode("utf-8", "replace").rstrip("\r\n") for line in first_lines]
    if forced is None:
        profile = detect_profile(text, profiles)
        if profile is not None:
            return profile.daemon, profile
        # (an empty input is no DOME log either: not worth compiling their profiles)
        candidates = dome_profiles() if text else []
        forced = detect_dome_profile(text, candidates) if candidates else None
    if forced is not None:
        return f"dome@{first_host(forced, text) or '?'}", forced
    return "?", None


def daemons_of(inputs: list, profiles: list[Profile], forced,
               dome_profiles: Callable[[], list[DomeProfile]] = NO_DOME, *,
               first_lines: Callable[[object], list[bytes]]
               ) -> dict[str, list[tuple[object, Profile | DomeProfile | None]]]:
    """The inputs grouped by daemon (by node for DOME logs), in the order first seen, each
    group's (input, profile it is read with) in the order given: each input recognised once
    from `first_lines(input)` (its head, read once: streams/inputs.py open_once; stdin too,
    which is then read on from there). The lanes' grouping, for a reader that feeds no
    pipeline (`replay --to-kafka`)."""
    groups: dict[str, list] = {}
    for inp in inputs:
        name, profile = recognise_profile(first_lines(inp), profiles, forced, dome_profiles)
        groups.setdefault(name, []).append((inp, profile))
    return groups


def lanes_of(inputs: list, profiles: list[Profile], forced, open_input: Callable,
             dome_profiles: Callable[[], list[DomeProfile]] = NO_DOME, *,
             first_lines: Callable[[object], list[bytes]]) -> list[Lane]:
    """One lane per daemon (daemons_of), its inputs in the order given."""
    lanes = []
    for name, group in daemons_of(inputs, profiles, forced, dome_profiles,
                                  first_lines=first_lines).items():
        lane = Lane(name, [inp for inp, _ in group], open_input)
        lane.profiles = {id(inp): profile for inp, profile in group}
        lanes.append(lane)
    return lanes


def run_lanes(lanes: list[Lane], on_input_end: Callable) -> None:
    """Feed every lane to its end, side by side in event time (parsers/side_by_side.py).
    `on_input_end(lane, error=None)` is told when an input ends, or ends early (an
    InputError: the lines before it are kept, the lane goes on with its next input)."""

    def feed(lane: Lane, limit: int | None) -> bool:
        try:
            more = lane.feed_until(limit)
        except InputError as exc:
            on_input_end(lane, exc)
            more = False
        else:
            if not more:
                on_input_end(lane)
        return more or lane.next_input()

    feed_side_by_side([lane for lane in lanes if lane.next_input()], feed)
