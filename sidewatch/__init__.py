"""sidewatch: approval-observability daemon and health monitor for AI agents."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sidewatch")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
