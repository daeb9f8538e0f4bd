"""The one exception tree of sidewatch.

    SidewatchError              anything sidewatch reports as a one-line message (CLI exit 1):
    │                           a listen address, a report path or format, a missing store
    ├── ConfigError             a config file or value is wrong; lists every problem at once
    ├── StoreError              the store cannot be reached, migrated or written, or its hash
    │                           key file read (the daemon skips the tick, HTTP answers 503)
    ├── LeaseLost               another replica took the audit lease over: this replica's
    │                           tick is dropped, its verdicts rolled back (store.lease)
    └── InputError              an ingest unit cannot be read at all (not gzip, no line)
        │                       (a bad *line* is a reject, not this)
        ├── TooLarge            over a size limit (HTTP 413)
        └── StoreRefused        the store refused the unit's data: a property of the unit,
                                not an outage (HTTP 400, JetStream terminates it)

"Unknown" and "uncertain" are verdicts, not exceptions; a rejected line is a value
(`ingest.agui.Reject`, its reason a `core.vocab.RejectReason`), counted and reported, never
raised. The interpreter's own `_LineError` and `ingest.evidence.EvidenceError` never leave
ingest: each becomes that value.
"""

from __future__ import annotations


class SidewatchError(Exception):
    """Base of every error sidewatch reports to a user."""


class ConfigError(SidewatchError):
    """A configuration is invalid; `problems` lists every problem found, not just the first."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        noun = "problem" if len(self.problems) == 1 else "problems"
        super().__init__(f"{source}: {len(self.problems)} {noun}:\n{lines}")


class StoreError(SidewatchError):
    """The store is unavailable or its schema cannot be brought up to date. `reason` is the
    store's own (its error class and code, and an outage's one-line cause), never a statement
    or a value."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class InputError(SidewatchError):
    """A whole ingest unit is unreadable (missing file, undecodable body)."""


class TooLarge(InputError):
    """An ingest unit is over a limit: inflated size, or lines per unit."""


class LeaseLost(SidewatchError):
    """This replica no longer holds the audit lease: another one took it over."""


class StoreRefused(InputError):
    """The store refused a unit's data (a data, integrity or programming error: a NUL in a
    string on PostgreSQL, an integer out of range). Nothing was stored, and the same unit would
    be refused again: it is not retried. `reason` is the error's class and code only."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def install_hint(extra: str) -> str:
    """The command that adds the optional `extra` (postgres, nats, otel) to the running
    installation, as pip recorded it (`direct_url.json`)."""
    import sys  # noqa: PLC0415 - only when a hint is said
    from importlib.metadata import distributions  # noqa: PLC0415

    # The installation pip recorded, not a build's `sidewatch.egg-info` left in the working
    # directory (which comes first on sys.path and records nothing); none when run from a
    # source tree on PYTHONPATH.
    recorded = next(
        (
            text
            for dist in distributions(name="sidewatch")
            if (text := dist.read_text("direct_url.json")) is not None
        ),
        None,
    )
    return hint_for(extra, recorded, sys.prefix)


def hint_for(extra: str, direct_url: str | None, prefix: str) -> str:
    """`install_hint` of an installation: a checkout installed editable (`make run`'s .venv)
    gets its own `pip install -e`, since `pip install 'sidewatch[…]'` there would fetch
    another sidewatch from PyPI over it; a directory installed as it was, that directory; a
    wheel from an index (no record, or not a directory), the index's line."""
    import json  # noqa: PLC0415
    import shlex  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    from urllib.parse import unquote, urlsplit  # noqa: PLC0415

    try:
        info = json.loads(direct_url) if direct_url else {}
    except ValueError:
        info = {}
    url = info.get("url", "") if isinstance(info, dict) else ""
    dir_info = info.get("dir_info") if isinstance(info, dict) else None
    if not isinstance(dir_info, dict) or not url.startswith("file://"):
        return f"pip install 'sidewatch[{extra}]'"
    source = Path(unquote(urlsplit(url).path))
    pip = Path(prefix) / "bin" / "pip"
    editable = "-e " if dir_info.get("editable") else ""
    if Path(prefix) == source / ".venv":
        return f"cd {shlex.quote(str(source))} && .venv/bin/pip install {editable}'.[{extra}]'"
    return f"{shlex.quote(str(pip))} install {editable}{shlex.quote(f'{source}[{extra}]')}"
