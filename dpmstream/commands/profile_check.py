"""`dpmstream profile check`: how well each regex profile fits a file, and whether it fits.

Per profile: the share of lines matched per role and the unmatched shapes (a wording the
profile misses). Per daemon found in the file: its required roles, the counters of the
real reassembly run over its lines, and the catch-all lines that look like a required
role. When a required role has no line or the reassembly shows the call lines are not
understood, a WARNING block names why and the exit status is 1.
"""

from __future__ import annotations

import sys
from collections import Counter

from dpmstream.commands.profile_check_dome import DomeTally, render_dome, render_dome_warning
from dpmstream.parsers.extension import compiled
from dpmstream.parsers.fastpath import compiled_role_lines
from dpmstream.parsers.fit import (
    CATCH_ALL, MIN_LINES_TO_JUDGE, OPENING, ORPHAN_ROLES, ROLE_MEANING, CutWatch, Reassembled, judge,
    looks_like,
)
from dpmstream.parsers.lines import MAX_LINE_BYTES
from dpmstream.parsers.dome_profiles import DomeProfile, bundled_dome_profiles, resolve_any_profile
from dpmstream.parsers.profiles import ROLES, ProfileError, bundled_profiles, match_line
from dpmstream.parsers.shapes import shape
from dpmstream.streams.inputs import InputError, describe, iter_chunks, open_binary
from dpmstream.parsers.pipeline import Pipeline

EXAMPLE_CHARS = 200
MAX_SHAPES = 10_000  # distinct catch-all shapes kept per profile; more are counted apart
NOT_FITTING = 1
ORPHAN_ROLE_INDEX = [ROLES.index(r) for r in ORPHAN_ROLES]  # a step's role is an index


def _text(raw: bytes) -> str:
    """A line as the check reads it: a bad byte is U+FFFD, the line break dropped."""
    return raw.decode("utf-8", "replace").rstrip("\r\n")


class ProfileTally:
    """Counts for one profile over one file; its daemon's lines also go through the real
    reassembly, so that lines matched only by a catch-all show as stray returns and
    orphans."""

    def __init__(self, profile, name: str):
        self.profile = profile
        self.roles: Counter = Counter()
        self.unmatched: Counter = Counter()  # shape -> count (while shaping)
        self.unmatched_lines = 0  # lines no role matched, shaped or not
        self.shaping = True  # shape_unmatched
        self.malformed = 0
        self.foreign = 0  # envelope and role match, but FUNC is not this daemon's
        # The daemon's own lines (FUNC is one of its functions):
        self.own = 0
        self.own_roles: Counter = Counter()
        self.catch_all: Counter = Counter()  # (role, shape) -> count
        self.catch_all_dropped = 0  # lines of shapes beyond MAX_SHAPES
        self.examples: dict[str, str] = {}  # shape -> first line of it
        self.cues: dict[str, tuple[str, ...]] = {}  # shape -> required roles it looks like
        self.cut = CutWatch()
        self.noreturn_before_end = 0
        # The records as the cut watch reads them: the extension's receiver hands it a
        # request's token and end, no dict made (native/src/request_ends.rs).
        ends = compiled("RequestEnds")
        receiver = self.cut.on_record if ends is None else ends(self.cut.gaps.end, self.cut.on_record)
        # The reassembly, made at the first line of the daemon (a profile whose daemon has
        # none, most of a check's, makes none: its line parser compiled the profile's
        # forms, ~1 ms each, and its engine, for nothing; issue 30).
        self._receiver, self._name = receiver, name
        self._pipeline = self._source = None
        self._finished = False
        self._orphans = 0
        # The per-line work in the extension where it is built (add_block); else, and for
        # the lines it leaves to Python, add() line by line: the reference.
        self.compiled = compiled_role_lines(profile, CATCH_ALL, ORPHAN_ROLES, OPENING,
                                            ("returns",), MAX_LINE_BYTES)

    @property
    def pipeline(self) -> Pipeline:
        """The daemon's lines' reassembly (an empty one, finished with the tally, where no
        line of the daemon came)."""
        if self._pipeline is None:
            self._start()
        return self._pipeline

    @property
    def source(self):
        if self._source is None:
            self._start()
        return self._source

    def _start(self) -> None:
        self._pipeline = Pipeline(self._receiver, profiles=[self.profile])
        self._source = self._pipeline.source(self._name, host="check", path=self._name,
                                             profile=self.profile)
        if self._finished:
            self._pipeline.finish()

    def shape_unmatched(self, on: bool) -> None:
        """Whether the lines no role matches are shaped from now on (else only counted): a
        tally that stopped is not printed with its shapes (_Shaping)."""
        self.shaping = on
        if self.compiled is not None:
            self.compiled.shape_unmatched = on

    def add_tallied(self, lines, n: int, t) -> None:
        """Lines of `lines` up to n as add() takes each one, from `t`, the extension's
        counts and classes of them (add_block): Python feeds the daemon's own lines to the
        reassembly a stretch of adjacent ones at a time (t.feeds), the cut watch looking
        at it after each token or slow-thread line as add() does (a quiet LineWatch: the
        extension's feed notes the line's token in the cut watch's gaps itself and calls
        _look only where the orphans moved), counts the shapes it found and reads whole
        the lines it leaves."""
        self.malformed += t.malformed
        self.foreign += t.foreign
        self.own += t.own
        self.unmatched_lines += t.unmatched
        for role, matched, own in zip(ROLES, t.roles, t.own_roles):
            if matched:
                self.roles[role] += matched
            if own:
                self.own_roles[role] += own
        shapes, shaped = t.shapes, 0
        feeds = t.feeds
        if feeds:
            watch = t.watch(self._look, self.cut.started, self.cut.gaps, self._orphans, ORPHAN_ROLE_INDEX)
            feed_chunk, reassembler, on_time = self.source.feed_chunk, self.pipeline.reassembler, self.cut.on_time
        for python, start, end in feeds:
            if python:
                shaped = self._add_shapes(lines, shapes, shaped, start)
                self.add(_text(lines[start]))
                watch.known = self._orphans  # the line may have moved them
            else:
                feed_chunk(lines, start, end=end, watch=watch)
                on_time(reassembler.latest)
        self._add_shapes(lines, shapes, shaped, n)

    def _look(self, k: int, latest: int | None, orphans: int) -> None:
        """The quiet LineWatch's hook: after the first line that gave the engine a time
        (k -1), the cut watch's time; after a watched line (the kth) of an orphan role that
        moved the orphans from what this tally saw, the change, as add() after it."""
        if k < 0:
            self.cut.on_time(latest)
            return
        self.cut.on_orphans(orphans - self._orphans, latest)
        self._orphans = orphans

    def _add_shapes(self, lines, shapes: list, at: int, before: int) -> int:
        """shapes[at:] the extension found up to line `before` (ProfileLines: one per
        shape, with its first line and count), as _shape takes them line by line; returns
        where it stopped."""
        while at < len(shapes) and shapes[at][0] < before:
            i, role, text, message_shape, count = shapes[at]
            if role is None:
                self._count_shape(self.unmatched, text, text, message_shape, _text(lines[i]), count)
            else:
                role = ROLES[role]
                self._count_shape(self.catch_all, (role, text), text, message_shape,
                                  _text(lines[i]), count)
            at += 1
        return at

    def _on_role(self, thread, role: str) -> None:
        if self.compiled is None:
            self.cut.on_role(thread, role)
        elif role in OPENING or role == "returns":
            self.compiled.note_thread(*thread, role == "returns")

    @property
    def returns_at_thread_start(self) -> int:
        return (self.cut if self.compiled is None else self.compiled).returns_at_thread_start

    def add(self, line: str) -> None:
        p = self.profile
        form, m, alt = match_line(p, line)
        if form is None:
            self.malformed += 1
            return
        func = m.group(form.envelope["func"])
        own = p.func_regex.match(func) is not None
        if own:
            self.own += 1
            self._feed(line, None if alt is None else alt.role)
        if alt is None:
            self.unmatched_lines += 1
            if self.shaping:
                self._shape(self.unmatched, None, func, line[m.start(m.lastindex):], line)
            return
        if not own:
            self.foreign += 1
        self.roles[alt.role] += 1
        if own:
            self.own_roles[alt.role] += 1
            env = form.envelope
            thread = (m.group(env["host"]) if "host" in env else None,
                      m.group(env["pid"]), m.group(env["tid"]))
            self._on_role(thread, alt.role)
            if "token" in alt.fields:
                self.cut.on_token(m.group(alt.fields["token"]), self.pipeline.reassembler.latest)
            if alt.role in CATCH_ALL:
                self._shape(self.catch_all, alt.role, func, line[m.start(m.lastindex):], line)

    def _feed(self, line: str, role: str | None) -> None:
        self.source.feed(line)
        self.cut.on_time(self.pipeline.reassembler.latest)
        self._watched(role)

    def _watched(self, role: str | None) -> None:
        """After a line of `role` went into the reassembly: the orphans it made or unmade."""
        if role in ORPHAN_ROLES:   # read the counter where it can move
            self._watched_orphans(self.pipeline.reassembler.latest)

    def _watched_orphans(self, latest: int | None) -> None:
        """The orphans the line just fed made or unmade, at the engine's `latest` time."""
        orphans = self.pipeline.reassembler.stat("orphans")
        if orphans != self._orphans:
            self.cut.on_orphans(orphans - self._orphans, latest)
            self._orphans = orphans

    def _shape(self, counter: Counter, role, func: str, message: str, line: str) -> None:
        message_shape = shape(message)
        text = f"{func}: {message_shape}"
        self._count_shape(counter, text if role is None else (role, text), text, message_shape,
                          line, 1)

    def _count_shape(self, counter: Counter, key, text: str, message_shape: str, line: str,
                     lines: int) -> None:
        """`lines` lines of one shape, `line` the first (the catch-all keys bounded)."""
        if key not in counter:
            if isinstance(key, tuple) and len(counter) >= MAX_SHAPES:  # a catch-all key
                self.catch_all_dropped += lines
                return
            self.examples.setdefault(text, line[:EXAMPLE_CHARS])
            if text not in self.cues:  # cues from the message alone, not the function name
                self.cues[text] = looks_like(message_shape, self.profile.required_roles)
        counter[key] += lines

    def finish(self) -> None:
        self._finished = True
        if self._pipeline is None:
            return
        # Calls the end of input cuts are no sign of a misfit: count the others apart.
        self.noreturn_before_end = self.pipeline.stats.reassembly.noreturn_calls
        self.pipeline.finish()

    @property
    def matched(self) -> int:
        return sum(self.roles.values())

    @property
    def own_matched(self) -> int:
        return sum(self.own_roles.values())

    @property
    def reassembled(self) -> Reassembled:
        s = self.pipeline.stats.reassembly
        return Reassembled(
            requests=s.requests, orphans=s.orphans,
            orphans_at_start=min(s.orphans, self.cut.orphans_explained()),
            orphans_judged=self.cut.orphans_judged, stray_returns=s.stray_returns,
            returns_at_thread_start=self.returns_at_thread_start,
            noreturn_calls=self.noreturn_before_end,
            noreturn_at_end=s.noreturn_calls - self.noreturn_before_end)

    def findings(self):
        return judge(self.profile.required_roles, self.own, self.own_roles, self.reassembled)

    def shapes_like(self, role: str, top: int) -> list[tuple[int, str, str]]:
        """(count, shape, where it fell) of catch-all and unmatched lines looking like `role`."""
        found = [(n, text, fell) for (fell, text), n in self.catch_all.items()
                 if role in self.cues.get(text, ())]
        found += [(n, text, "unmatched") for text, n in self.unmatched.items()
                  if role in self.cues.get(text, ())]
        return sorted(found, key=lambda f: -f[0])[:top]


def add_block(tallies: list[ProfileTally], lines, n: int, start: int = 0) -> None:
    """Lines `start` to n of `lines` (a block of the file's lines as bytes) into each
    tally, as add() takes each line: the extension reads each line once for all the
    profiles it is built for (tally_profiles: the envelope they share read once, not once
    a profile), and each of those takes its counts (add_tallied); another, line by line."""
    built = [t for t in tallies if t.compiled is not None]
    if built:
        tally_profiles = compiled("tally_profiles")
        for t, counts in zip(built, tally_profiles([t.compiled for t in built], lines, n, start)):
            t.add_tallied(lines, n, counts)
    for t in tallies:
        if t.compiled is None:
            for i in range(start, n):
                t.add(_text(lines[i]))


# A file's blocks kept, for a profile's tally again (_Shaping), up to this many bytes.
KEEP_BYTES = 32 << 20
FIRST_LOOK = 1024  # lines of a file's first block after which the profiles shaping are chosen


class _Shaping:
    """Which of a file's tallies shape the lines their profile leaves unmatched. Only the
    best-fitting profile's and the present daemons' shapes are printed, and which those are
    is known at the end of the file; masking a message is most of a profile's work where
    it does not fit (every line of a DPM log is unmatched by the two other profiles: ~160 M
    instructions of the thesis log's ~1,600 M, issue 30). So after each block (and after
    the first FIRST_LOOK lines) a profile that is neither so far stops shaping, the
    file's blocks are kept, and one that becomes
    either is tallied again over them, shaping: its tally is the one a pass shaping all
    along makes. A file larger than KEEP_BYTES, or of unknown size, is shaped throughout
    (the blocks kept until it shows to be larger, its stopped tallies then redone)."""

    def __init__(self, name: str, inp, stream):
        self.name, self.stream = name, stream
        small = inp.size is not None and not inp.fifo and not inp.is_stdin and inp.size <= KEEP_BYTES
        self.kept: list | None = [] if small else None

    def add(self, tallies: list[ProfileTally], lines, n: int) -> None:
        """The first n of the block `lines` into `tallies` (add_block; a tally replaced
        in place where it is tallied again)."""
        if self.kept is None:
            add_block(tallies, lines, n)
            return
        at = 0
        if not self.kept and n > FIRST_LOOK:
            add_block(tallies, lines, FIRST_LOOK)
            self._stop(tallies)
            at = FIRST_LOOK
        add_block(tallies, lines, n, at)
        self.kept.append((lines, n))
        if self._larger():
            self.settle(tallies, everyone=True)
            self.kept = None
            return
        self.settle(tallies)
        self._stop(tallies)

    def _stop(self, tallies: list[ProfileTally]) -> None:
        for t in tallies:
            if t.shaping and not self._needed(t, tallies):
                t.shape_unmatched(False)

    def settle(self, tallies: list[ProfileTally], everyone: bool = False) -> None:
        """Each tally that stopped shaping and is needed (or any, `everyone`) tallied
        again over the kept blocks, shaping."""
        for k, t in enumerate(tallies):
            if not t.shaping and (everyone or self._needed(t, tallies)):
                again = ProfileTally(t.profile, self.name)
                for lines, n in self.kept or ():
                    add_block([again], lines, n)
                tallies[k] = again

    @staticmethod
    def _needed(t: ProfileTally, tallies: list[ProfileTally]) -> bool:
        """Whether `t`'s shapes would be printed were the file to end here: its daemon
        present, or the best fit (render_check's, any of a tie)."""
        return t.own_matched > 0 or t.matched - t.foreign == max(u.matched - u.foreign for u in tallies)

    def _larger(self) -> bool:
        try:
            return self.stream.tell() > KEEP_BYTES
        except (OSError, ValueError, AttributeError):
            return True


def _profiles(specs) -> tuple[list, list]:
    """(DPM profiles, DOME profiles) named by --profile, or all the bundled ones."""
    if not specs:
        return bundled_profiles(), bundled_dome_profiles()
    dpm, dome = [], []
    for spec in specs:
        profile = resolve_any_profile(spec)
        (dome if isinstance(profile, DomeProfile) else dpm).append(profile)
    return dpm, dome


def run_check(args) -> int:
    try:
        profiles, dome_profiles = _profiles(args.profile)
    except ProfileError as exc:
        print(f"dpmstream profile check: {exc}", file=sys.stderr)
        return 2
    status = 0
    for name in args.files:
        try:
            inp = describe(name)
            stream, _ = open_binary(inp)
        except (InputError, OSError) as exc:
            print(f"dpmstream profile check: {exc}", file=sys.stderr)
            status = 2
            continue
        tallies = [ProfileTally(p, name) for p in profiles]
        dome_tallies = [DomeTally(p) for p in dome_profiles]
        shaping = _Shaping(name, inp, stream)
        total = 0
        try:
            for lines in iter_chunks(stream):
                n = len(lines) if not args.max_lines else min(len(lines), args.max_lines - total)
                shaping.add(tallies, lines, n)
                for dome in dome_tallies:
                    dome.add_block(lines, n, _text)
                total += n
                if args.max_lines and total >= args.max_lines:
                    break
        except InputError as exc:
            print(f"dpmstream profile check: {name}: {exc}", file=sys.stderr)
            status = 2
        for tally in (*tallies, *dome_tallies):
            tally.finish()
        print("\n".join([render_check(name, total, tallies, args.top)]
                        + [text for d in dome_tallies for text in render_dome(total, d, args.top)]))
        warning = "\n".join(w for w in [render_warning(name, total, tallies, args.top, dome_tallies)]
                            + [render_dome_warning(name, d) for d in dome_tallies] if w)
        if warning:
            print(warning)
            status = max(status, NOT_FITTING)
    return status


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:5.1f}%" if total else "    -"


def render_check(name: str, total: int, tallies: list[ProfileTally], top: int) -> str:
    out = [f"{name}: {total} lines"]
    best = max(tallies, key=lambda t: t.matched - t.foreign, default=None)
    for t in sorted(tallies, key=lambda t: -(t.matched - t.foreign)):
        unmatched = t.unmatched_lines
        mark = "  <- best fit" if t is best and t.matched else ""
        out.append(f"  profile {t.profile.name}: matched {_pct(t.matched, total)}, unmatched "
                   f"{_pct(unmatched, total)}, no envelope {_pct(t.malformed, total)}{mark}")
        if t.foreign:
            out.append(f"    {t.foreign} matched lines are under functions not of "
                       f"daemon {t.profile.daemon}")
        for role in ROLES:
            if t.roles[role]:
                out.append(f"    {role:<12} {t.roles[role]:>9} {_pct(t.roles[role], total)}")
    if best is not None and best.unmatched:
        out.append(f"  most common unmatched shapes ({best.profile.name}):")
        for text, count in best.unmatched.most_common(top):
            out.append(f"    {count:>9}  {text}")
    for t in _present(tallies):
        out.extend(_render_fit(t, top))
    return "\n".join(out)


def _with(n: int, cut: int, where: str) -> str:
    """A count with how many of it a file cut mid-way explains."""
    return f"{n} ({cut} {where})" if cut else f"{n}"


def _present(tallies: list[ProfileTally]) -> list[ProfileTally]:
    """The profiles whose daemon has lines in the file (a role matched under its functions)."""
    return [t for t in tallies if t.own_matched]


def _render_fit(t: ProfileTally, top: int) -> list[str]:
    p = t.profile
    out = [f"  fit of profile {p.name} (daemon {p.daemon}): {t.own} lines under its functions"]
    if p.required_roles:
        judged = t.own >= MIN_LINES_TO_JUDGE
        counts = ", ".join(f"{r} {t.own_roles[r]}" + (" MISSING" if judged and not t.own_roles[r]
                                                      else "")
                           for r in p.required_roles)
        out.append(f"    required roles: {counts}")
        if not judged:
            out.append(f"    (fewer than {MIN_LINES_TO_JUDGE} lines: too few to judge a "
                       f"missing role)")
    r, s = t.reassembled, t.pipeline.stats.reassembly
    orphans = (_with(r.orphans, r.orphans_at_start, "near the start") if r.orphans_judged
               else f"{r.orphans} (too short a file to tell them from a cut start)" if r.orphans else "0")
    out.append(f"    reassembly: {s.requests} requests, {s.calls} calls; orphans "
               f"{orphans}, stray returns "
               f"{_with(r.stray_returns, min(r.stray_returns, r.returns_at_thread_start), 'first on their thread')}, "
               f"calls without returns "
               f"{_with(r.noreturn_calls + r.noreturn_at_end, r.noreturn_at_end, 'at the end of input')}, "
               f"late lines {s.late_lines}")
    n_catch = sum(t.catch_all.values()) + t.catch_all_dropped
    if n_catch:
        out.append(f"    lines only a catch-all role ({', '.join(CATCH_ALL)}) matched: "
                   f"{n_catch}; most common shapes:")
        for (role, text), count in t.catch_all.most_common(top):
            cue = t.cues.get(text)
            hint = f"  [looks like {', '.join(cue)}]" if cue else ""
            out.append(f"    {count:>9}  {role:<7} {text}{hint}")
            out.append(f"    {'':>9}  {'e.g.':<7} {t.examples[text]}")
    return out


def render_warning(name: str, total: int, tallies: list[ProfileTally], top: int,
                   dome: tuple = ()) -> str:
    """The WARNING block for this file, or "" when every daemon's profile fits (`dome`:
    the DOME tallies, judged apart, whose lines count as a daemon's here)."""
    present = _present(tallies)
    if not present and any(d.own for d in dome):
        return ""
    if not present:
        names = ", ".join([f"{t.profile.name} ({t.profile.daemon})" for t in tallies]
                          + [f"{d.profile.name} (DOME)" for d in dome])
        return (f"WARNING: {name}: no line of any daemon: none of {total} lines is a line "
                f"that profile {names} recognises (no envelope, or no role under the "
                f"daemon's functions). Wrong file, or a log format no profile knows.")
    out = []
    for t in present:
        findings = t.findings()
        if not findings:
            continue
        p = t.profile
        out.append(f"WARNING: {name}: profile {p.name} does not fit this {p.daemon} log; "
                   f"replay with it would lose calls and request phases:")
        for f in findings:
            out.append(f"  - {f.message}")
            if f.role is not None:
                like = t.shapes_like(f.role, top)
                if like:
                    out.append(f"    lines that look like {ROLE_MEANING.get(f.role, f.role)}:")
                for count, text, fell in like:
                    out.append(f"    {count:>9}  {text}  (fell to {fell})")
                    out.append(f"    {'':>9}  e.g. {t.examples[text]}")
        out.append(f"  Adapt the profile: copy {p.source}, fix the patterns named above, and "
                   f"pass --profile FILE (README, \"Regex profiles\").")
    return "\n".join(out)
