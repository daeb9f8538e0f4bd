"""sidewatch: approval-observability daemon and health monitor for AI agents."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # `__version__` is read from the installed metadata when first asked for: importing
    # importlib.metadata costs a command that never shows the version a few tens of ms.
    if name != "__version__":
        raise AttributeError(f"module 'sidewatch' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        found = version("sidewatch")
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = "0.0.0"
    globals()["__version__"] = found
    return found
