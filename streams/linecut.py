"""The one rule for cutting a byte stream into lines, for every reader of logs (the live
follower, replay's archives and stdin): what of a line is held, and what a NUL run is.

- A line longer than CUT_BYTES (parsers.lines.MAX_LINE_BYTES + 1) is handed on cut to that
  length and the rest skipped to its line break as it is read, never held: the parser
  counts it as ONE malformed line (longer than MAX_LINE_BYTES) at its place.
- A run of NUL bytes (the hole a crashed writer leaves) ends the line before it and is
  handed on as one short NUL line (NUL_BLOCK, one malformed line), whatever its length; a
  line break right after the run is its own; the line after it is read on its own.
"""

from __future__ import annotations

from dpmstream.parsers.lines import MAX_LINE_BYTES

NEWLINE = b"\n"
NUL = b"\0"
NUL_BLOCK = b"\0" * 16  # what a NUL block is handed on as: one line the parser counts bad
# Longest line handed on whole, in bytes. The parser counts a line of more than
# MAX_LINE_BYTES bytes as malformed (a cut multi-byte character included), so the first
# CUT_BYTES of a longer line are still one malformed line, whatever its length, and at
# most this much of it is held.
CUT_BYTES = MAX_LINE_BYTES + 1


class LineCutter:
    """Cuts the chunks of one byte stream, read in turn, into lines by the rule above.
    Holds at most `cap` bytes of an unfinished line between chunks."""

    def __init__(self, cap: int = CUT_BYTES) -> None:
        self.cap = cap
        self.partial = b""             # bytes after the last line break (at most cap)
        self.skip_to_newline = False   # the rest of a line is not to be handed out
        self.in_nuls = False           # inside a run of NUL bytes
        self.oversized = 0             # lines longer than cap, cut to it
        self.nul_blocks = 0            # runs of NUL bytes handed on as NUL_BLOCK

    def start_afresh(self) -> None:
        """What comes next starts a line of its own (the stream was replaced or moved):
        no skipping of the rest of a long line or of a NUL run. `partial` is the caller's."""
        self.skip_to_newline = self.in_nuls = False

    def split(self, chunk: bytes, out: list[bytes]) -> None:
        """Append the lines `chunk` completes to `out`, without their line breaks."""
        data = self.partial + chunk if self.partial else chunk
        self.partial = b""
        start = 0
        if self.in_nuls or self.skip_to_newline or NUL in chunk:
            start = self._split_slowly(data, out)
            if start is None:
                return
        cap = self.cap
        while True:
            end = data.find(NEWLINE, start)
            if end < 0:
                break
            if end - start > cap:
                self._cut_line(data[start:start + cap], out)
            else:
                out.append(data[start:end])
            start = end + 1
        self._keep_partial(data, start, out)

    def whole(self, chunk: bytes) -> bytes:
        """The lines `chunk` completes as one text, each line with its line break, for a
        reader that splits a text itself (replay: in C or in the extension). A line of
        the chunk that ends in it is left whole, longer than cap or not (the parser judges
        it; it is at most a chunk and cap long): only an unfinished one is cut."""
        return b"".join(self.whole_parts(chunk))

    def whole_parts(self, chunk: bytes) -> list:
        """whole(chunk) as the buffers it is made of, in order (bytes, or a memoryview of
        `chunk`), so that a reader joining them with what it holds copies the text once."""
        if self.in_nuls or self.skip_to_newline or NUL in chunk:
            lines: list[bytes] = []
            self.split(chunk, lines)
            return [line + NEWLINE for line in lines]  # rare: damaged input
        # The partial line has no line break: the text ends at the chunk's last one.
        end = chunk.rfind(NEWLINE) + 1
        parts = [self.partial] if self.partial and end else []
        data = chunk if end else self.partial + chunk
        self.partial = b""
        cut: list[bytes] = []
        self._keep_partial(data, end, cut)
        if end:
            parts.append(chunk if end == len(chunk) else memoryview(chunk)[:end])
        return parts + [cut[0], NEWLINE] if cut else parts

    def flush(self) -> bytes:
        """At the end of the stream: the unfinished line, as it is (b"" if none)."""
        rest, self.partial = self.partial, b""
        self.skip_to_newline = self.in_nuls = False
        return rest

    def _split_slowly(self, data: bytes, out: list[bytes]) -> int | None:
        """split() of data with NUL bytes in it, or while skipping (the rest of a line too
        long, or a NUL block): up to its last line break; where the rest starts, or None
        when nothing is left."""
        cap = self.cap
        start, n = 0, len(data)
        while start < n:
            if self.in_nuls:
                rest = data[start:].lstrip(NUL)
                if not rest:
                    return None
                start = n - len(rest)
                self.in_nuls = False
                if rest[:1] == NEWLINE:
                    start += 1       # the NUL block's own line break
                continue
            if self.skip_to_newline:
                end = _find_break(data, start)
                if end < 0:
                    return None
                self.skip_to_newline = False
                start = end + 1 if data[end:end + 1] == NEWLINE else end
                continue
            if data.find(NUL, start) < 0:
                return start         # no more NULs: the fast loop takes the rest
            end = _find_break(data, start)
            if end < 0:
                break
            if end - start > cap:
                self._cut_line(data[start:start + cap], out)
            elif end > start or data[end:end + 1] == NEWLINE:
                out.append(data[start:end])
            if data[end:end + 1] == NUL:
                out.append(NUL_BLOCK)  # one bad line for the whole block
                self.nul_blocks += 1
                self.in_nuls = True
                start = end
            else:
                start = end + 1
        self._keep_partial(data, start, out)
        return None

    def _keep_partial(self, data: bytes, start: int, out: list[bytes]) -> None:
        """Keep data[start:] for the next chunk, or, past cap without a line break, hand
        on its first cap bytes and skip the rest to the next break."""
        if len(data) - start > self.cap:
            self._cut_line(data[start:start + self.cap], out)
            self.skip_to_newline = True
        else:
            self.partial = data[start:]

    def _cut_line(self, head: bytes, out: list[bytes]) -> None:
        out.append(head)
        self.oversized += 1


def _find_break(data: bytes, start: int) -> int:
    """Index of the first line break or NUL byte at or after `start`, -1 if none."""
    nl, nul = data.find(NEWLINE, start), data.find(NUL, start)
    return nl if nul < 0 else nul if nl < 0 else min(nl, nul)
