"""Line shapes: a message with its variable parts masked, so that unmatched lines group.

Used by `dpmstream profile check` to show an admin which wordings a profile misses.
"""

from __future__ import annotations

import re
from functools import lru_cache

# (pattern, mask) in the order applied; native/src/profile_tally.rs applies the same ones
# to printable ASCII messages.
MASKS = (
    # A certificate DN: /DC=ch/DC=cern/OU=.../CN=Some One, up to " (uid,gid" or the end.
    (re.compile(r"(?:/[A-Za-z]+=[^/]*?)+(?= \(\d|$)"), "<DN>"),
    # The caller's ids after a DN, (uid,gid[,gid...]): one shape whatever the groups.
    (re.compile(r"\(\d+(?:,\d+)+\)"), "(<IDS>)"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<UUID>"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+"), "<URL>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b"), "<IP>"),
    (re.compile(r"\b(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b"), "<HOST>"),
    (re.compile(r"(?<![\w<])/[^\s:]+"), "<PATH>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d+\b"), "N"),
)


# `profile check` shapes a line once per profile that leaves it unmatched or to a
# catch-all (the same message under the same envelope): the last few are remembered.
SHAPE_CHARS = 200  # a shape's length at most


@lru_cache(maxsize=16)
def shape(text: str, limit: int = SHAPE_CHARS) -> str:
    """The text with DNs, UUIDs, URLs, IPs, hosts, paths and numbers masked."""
    text = text[: limit * 4]
    for pattern, mask in MASKS:
        text = pattern.sub(mask, text)
    return text[:limit]
