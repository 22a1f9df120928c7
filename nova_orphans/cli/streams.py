"""The standard streams and the log, in whatever state the caller left them (docs/design.md §10).

A closed stream (``cmd >&-``), a full device (``> /dev/full``), a reader gone away
(``| head``) or an encoding that cannot show a guest's name (``PYTHONIOENCODING=ascii``, a
Latin-1 locale) ends a command in one line on what is still open and its exit code, never in
a traceback:

- a descriptor 0, 1 or 2 closed at start is opened on ``/dev/null`` first, so no file the
  command opens (the journal, the log) takes its number and gets what was meant for it;
- standard output that cannot be written raises ``StreamError`` (exit 1), said on stderr; a
  closed one fails at its first write, and at the end every command flushes it (``flush``);
- standard error that cannot be written loses its line: nothing else is there to say it
  (never standard output, whose JSON stays JSON);
- a closed standard input is no terminal and cannot be read (``StreamError``);
- a character the stream's encoding lacks is written as its backslash escape;
- a log handler that cannot write says so in one line on stderr, once, never a traceback.

NOTE: imported by ``nova-orphans`` before it knows the sub-command: no library here.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from nova_orphans import exits
from nova_orphans.cli import common
from nova_orphans.exceptions import NovaOrphansError

#: What a character a stream's encoding lacks becomes (``é`` as ``\xe9`` in ASCII).
ESCAPE = "backslashreplace"


class StreamError(NovaOrphansError):
    """A standard stream cannot be read or written: an I/O failure, exit 1."""

    exit_code = exits.ERROR
    label = "error"


def reason(exc: BaseException) -> str:
    """Why a write failed, in the operator's words (``No space left on device``)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class Stream:
    """A standard stream as the command line writes it: characters its encoding lacks
    escaped, its failures per ``name`` — standard output raises ``StreamError``, standard
    error drops what it cannot write. ``stream`` None: the descriptor was closed at start."""

    def __init__(self, stream: TextIO | None, name: str) -> None:
        self.stream = stream
        self.name = name
        #: Why the stream can no longer be written (it then takes nothing more).
        self.failure: str | None = None if stream is not None else "closed"

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return ESCAPE

    def write(self, text: str) -> int:
        if self.failure is None and self.stream is not None:
            try:
                try:
                    self.stream.write(text)
                except UnicodeEncodeError:
                    self.stream.write(text.encode(self.encoding, ESCAPE).decode(self.encoding))
            except (OSError, ValueError) as exc:
                self._fail(exc)
        self._raise()
        return len(text)

    def flush(self) -> None:
        if self.failure is None and self.stream is not None:
            try:
                self.stream.flush()
            except (OSError, ValueError) as exc:
                self._fail(exc)
        self._raise()

    def _fail(self, exc: BaseException) -> None:
        self.failure = reason(exc)
        _discard(self.stream)

    def _raise(self) -> None:
        """Standard output that cannot be written stops the command (``StreamError``), at each
        write; standard error takes the loss."""
        if self.failure is None or self.name != "stdout":
            return
        if self.stream is None:
            raise StreamError("standard output is closed; nothing was printed")
        raise StreamError(f"standard output: {self.failure}; the output is incomplete")

    def isatty(self) -> bool:
        try:
            return self.failure is None and self.stream is not None and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self.stream is None:
            raise OSError(9, f"standard {self.name[3:]} is closed")
        return self.stream.fileno()

    def writable(self) -> bool:
        return self.failure is None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _discard(stream: TextIO | None) -> None:
    """Point ``stream``'s descriptor at /dev/null: what its buffer still holds goes nowhere,
    and the interpreter's last flush cannot fail with a message of its own."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):
        return
    if fd >= 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


class ClosedInput:
    """Standard input closed at start: no terminal, and reading it is an error."""

    def isatty(self) -> bool:
        return False

    def _closed(self, *_: object) -> str:
        raise StreamError("standard input is closed")

    read = readline = _closed

    def __iter__(self) -> Iterator[str]:
        self._closed()
        return iter(())


def _closed(fd: int) -> bool:
    """Whether descriptor ``fd`` is closed; if so it is opened on /dev/null now."""
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return True


@contextlib.contextmanager
def standard() -> Iterator[None]:
    """``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` as this module says, for a ``with``
    block (one command); the interpreter's own after it."""
    saved = sys.stdin, sys.stdout, sys.stderr
    closed = [_closed(fd) for fd in (0, 1, 2)]
    if closed[0] or sys.stdin is None:
        sys.stdin = ClosedInput()  # type: ignore[assignment]
    sys.stdout = Stream(None if closed[1] else sys.stdout, "stdout")  # type: ignore[assignment]
    sys.stderr = Stream(None if closed[2] else sys.stderr, "stderr")  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def flush() -> None:
    """Flush standard output now: a failure to write it is ``StreamError`` while the command
    can still say so, not a message of the interpreter's at exit."""
    sys.stdout.flush()


def guard_log_handlers() -> None:
    """Every log handler escapes what its file's encoding lacks, and a write it cannot make
    is one line on stderr, once per handler (a full disk, ``--log-file /dev/full``), never
    logging's traceback of each record."""
    import logging  # NOTE: here: the command line's parser loads no module it can spare

    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.FileHandler):
                handler.errors = ESCAPE  # NOTE: a handler that reopens its file (rotation)
                stream = getattr(handler, "stream", None)
                if stream is not None and hasattr(stream, "reconfigure"):
                    stream.reconfigure(errors=ESCAPE)
            handler.handleError = _LogFailure(handler)  # type: ignore[method-assign]


class _LogFailure:
    """What a handler does with a record it could not write: say so once, on stderr."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.said = False

    def __call__(self, _record: object) -> None:
        if self.said:
            return
        self.said = True
        exc = sys.exc_info()[1]
        where = getattr(self.handler, "baseFilename", None) or type(self.handler).__name__
        why = reason(exc) if exc is not None else "unknown error"
        common.fail(
            exits.ERROR, f"error: log {where} not written: {why}; nothing more is logged there"
        )
