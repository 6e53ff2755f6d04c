"""Loggers that import `logging` only when they have a message to write.

`logging` and what it brings (traceback, linecache, tokenize, string, threading) were
~20 M instructions of every replay's start-up, ~6% of a two-line replay's (issue 30), for
messages a replay without -v seldom writes. A LazyLogger decides as logging would: while
`logging` is not imported nobody can have set a level or a handler, so a message below
the level configure() was given (WARNING, logging's root's, when it was not called) is
dropped then and there; any other message imports logging, applies the configuration
configure() kept (logging.basicConfig's arguments), and goes to logging.getLogger(name),
which decides from then on. Once `logging` is imported, by anyone, configure() is
basicConfig itself and every message goes to logging.
"""

from __future__ import annotations

import sys

_WARNING = 30    # logging.WARNING: the root logger's level until one is set
_pending: dict | None = None   # basicConfig's arguments, kept until logging is imported
_level = _WARNING


def configure(**kwargs) -> None:
    """logging.basicConfig(**kwargs), now if logging is imported, else when a message is
    first written."""
    global _pending, _level
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.basicConfig(**kwargs)
        return
    _pending = kwargs
    _level = kwargs.get("level", _WARNING)


def _logging():
    global _pending
    import logging
    if _pending is not None:
        pending, _pending = _pending, None
        logging.basicConfig(**pending)
    return logging


class LazyLogger:
    """logging.getLogger(name)'s debug, info, warning and error, logging imported only
    for a message that is written."""

    __slots__ = ("name", "_real")

    def __init__(self, name: str):
        self.name = name
        self._real = None

    def _log(self, level: int, msg, args, kwargs) -> None:
        real = self._real
        if real is None:
            if "logging" not in sys.modules and level < _level:
                return
            real = self._real = _logging().getLogger(self.name)
        # The caller of debug/info/...: the record's place, as logging's own would say.
        kwargs.setdefault("stacklevel", 3)
        real.log(level, msg, *args, **kwargs)

    def debug(self, msg, *args, **kwargs) -> None:
        self._log(10, msg, args, kwargs)

    def info(self, msg, *args, **kwargs) -> None:
        self._log(20, msg, args, kwargs)

    def warning(self, msg, *args, **kwargs) -> None:
        self._log(_WARNING, msg, args, kwargs)

    def error(self, msg, *args, **kwargs) -> None:
        self._log(40, msg, args, kwargs)


def get_logger(name: str) -> LazyLogger:
    return LazyLogger(name)
