"""The daemon's logs: one JSON object a line, every producer-given text cleaned and capped, a
database error told by its class and code only; and the once-per-interval filter on the
messages a client can make the daemon repeat."""

from __future__ import annotations

import logging
import sys
import time
import traceback
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.exc import StatementError

from sidewatch.core.text import cap, clean, safe
from sidewatch.store.db import failure

LOG_MESSAGE_LIMIT = 2000  # characters of a log record's message
LOG_TRACEBACK_LIMIT = 16_000


class JsonLogs(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception, if any).
    A message may hold a producer's ids: it is cleaned and capped (`core.text.safe`), and the
    traceback line by line, so that no input can forge a record or a line of its own."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": safe(record.getMessage(), LOG_MESSAGE_LIMIT),
        }
        # Every `extra=` field (our code's counts and ids, never content), cleaned like msg.
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in entry:
                entry[key] = safe(value, LOG_MESSAGE_LIMIT) if isinstance(value, str) else value
        if record.exc_info:
            lines = self.formatException(record.exc_info).split("\n")
            entry["exc"] = cap("\n".join(map(clean, lines)), LOG_TRACEBACK_LIMIT)
        return orjson.dumps(entry, default=_logged).decode()

    def formatException(self, ei: Any) -> str:
        """The traceback; but where a database error is in it, that error is told as its class
        and code only (its text holds the statement, and a server's DETAIL line may hold a
        unit's values) and frames without their source lines (which may quote a statement)."""
        chain: list[BaseException] = []
        exc: BaseException | None = ei[1]
        while exc is not None and exc not in chain:
            chain.append(exc)
            exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if not any(_is_db_error(x) for x in chain):
            return super().formatException(ei)
        return "\n\nwhich led to:\n\n".join(
            "Traceback (most recent call last):\n"
            + "".join(
                f'  File "{f.filename}", line {f.lineno}, in {f.name}\n'
                for f in traceback.extract_tb(x.__traceback__)
            )
            + (failure(x) if _is_db_error(x) else f"{type(x).__name__}: {x}")
            for x in reversed(chain)
        )


# What every LogRecord has: anything else on a record came from `extra=`.
_RECORD_FIELDS = frozenset(
    {*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime", "taskName"}
    | {"color_message"}  # uvicorn's msg again, with terminal colours
)


def _logged(value: Any) -> str:
    """An `extra=` value JSON cannot hold, as its cleaned text."""
    return safe(str(value), LOG_MESSAGE_LIMIT)


def _is_db_error(e: BaseException) -> bool:
    """SQLAlchemy's wrapper of a driver error, or a driver's own (psycopg, sqlite3)."""
    return isinstance(e, StatementError) or hasattr(e, "sqlstate") or hasattr(e, "sqlite_errorcode")


LOG_REPEAT_SECONDS = 60.0  # how often a message a client can trigger may be logged


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogs())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    # Loggers a client can make speak once per connection: asyncio's "socket.accept() out of
    # system resource" on a connection flood, uvicorn's "Invalid HTTP request received.".
    for name in ("asyncio", "uvicorn.error", "sidewatch.http"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, OncePer) for f in logger.filters):
            logger.addFilter(OncePer(LOG_REPEAT_SECONDS))


class OncePer(logging.Filter):
    """Lets each message through at most once per `seconds`; the next one that passes says how
    many were held back meanwhile."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # The template's first line: asyncio's messages go on with the socket's repr.
        key = str(record.msg).split("\n", 1)[0][:200]
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.seconds:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        if len(self._last) > 1000:  # bounded, whatever the messages
            self._last.clear()
            self._held.clear()
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this held back)"
        return True
