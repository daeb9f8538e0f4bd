"""Configuration: the frozen `Config` a daemon or command runs with, its parts and defaults,
and the checks of a value the command line shares (durations, listen addresses). The file is
read, checked and loaded into a `Config` by `config_schema` (`load_config`)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from sidewatch.core.model import Code
from sidewatch.core.policy import DEFAULT_POLICY, Policy

DEFAULT_DB_URL = "sqlite:///./sidewatch.db"
DEFAULT_LISTEN = "127.0.0.1:9477"
DEFAULT_REPORT_SCHEDULE = "0 0 * * *"  # nightly, UTC
REPORT_FORMATS = ("md", "html", "json")
DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_MAX_INFLATED = 64 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 1024
SCOPES = frozenset({"ingest", "read"})
# What an ingest token may be narrowed to (`kinds:`): AG-UI lines, or one evidence event each.
INGEST_KINDS = ("agui", "route", "decision", "heartbeat", "receipt", "action")
ENV_TOKENS = {"SIDEWATCH_INGEST_TOKEN": "ingest", "SIDEWATCH_READ_TOKEN": "read"}
DEFAULT_ROLE_PREFIXES = ("role:", "policy:", "group:", "team:", "queue:", "service:")
ENV_DB_URL = "SIDEWATCH_DB_URL"
ENV_REF_KEY = "SIDEWATCH_APPROVER_REF_KEY"
ENV_NATS_URL = "SIDEWATCH_NATS_URL"
# The server's keys the environment sets (over the file): a container starts from these alone.
ENV_SERVER = {
    "SIDEWATCH_LISTEN": ("listen",),
    "SIDEWATCH_EXTERNAL_URL": ("externalUrl",),
    "SIDEWATCH_ALLOW_PLAINTEXT": ("allowPlaintext",),
    "SIDEWATCH_PROTECT_METRICS": ("protectMetrics",),
    "SIDEWATCH_TLS_CERT_FILE": ("tls", "certFile"),
    "SIDEWATCH_TLS_KEY_FILE": ("tls", "keyFile"),
}
NATS_SCHEMES = ("nats://", "tls://", "ws://", "wss://")

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token and what it may do (`ingest`, `read`), and with `ingest`, the kinds of
    lines it may send (`INGEST_KINDS`; None: every kind)."""

    name: str
    secret: str = field(repr=False)
    scopes: frozenset[str]
    kinds: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class NatsSource:
    """A NATS JetStream stream to ingest from, through a durable pull consumer."""

    url: str = field(repr=False)  # may hold credentials (nats://user:password@host:4222)
    stream: str
    durable: str = "sidewatch"
    subject: str | None = None  # the consumer's filter; None: every subject of the stream
    batch: int = 64
    ack_wait_ms: int = 60_000
    retry_delay_ms: int = 5_000


@dataclass(frozen=True, slots=True)
class Config:
    db_url: str = DEFAULT_DB_URL
    store_busy_timeout_ms: int = 10_000  # SQLite: how long to wait for another writer
    # PostgreSQL: see sidewatch.store.db.Limits (the same defaults)
    store_connect_timeout_ms: int = 5_000
    store_statement_timeout_ms: int = 15_000
    store_pool_size: int = 10
    store_pool_timeout_ms: int = 5_000
    store_prepare_threshold: int | None = 5  # None: never prepare (PgBouncer transaction mode)
    store_retention_ms: int = 30 * 86_400_000  # store.retention
    # store.heartbeatCompaction: beats of one thread, run and handle this close or closer
    # are kept as one span row (0: every beat of another time is a row of its own).
    store_heartbeat_compaction_ms: int = 60_000
    policies: tuple[Policy, ...] = (DEFAULT_POLICY,)
    approver_ref_key: str | None = None  # None: the key in `hash_key_file` (generated)
    hash_key_file: str | None = None  # None: `<file>.key` beside an SQLite store (see privacy)
    keyed_digests: bool = False  # privacy.actionDigest: keyed (HMAC with the hash key)
    role_prefixes: tuple[str, ...] = DEFAULT_ROLE_PREFIXES
    listen: str = DEFAULT_LISTEN
    # Where people reach this daemon (https://sidewatch.example): alert and report links.
    external_url: str | None = None
    tokens: tuple[Token, ...] = ()
    # Names the server is also reached by (Host), besides its listen address and loopback's.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()  # browser origins allowed to call (scheme://host:port)
    max_connections: int = (
        DEFAULT_MAX_CONNECTIONS  # open connections at once; the oldest idle yields
    )
    trusted_proxies: tuple[str, ...] = ()  # addresses/CIDRs whose X-Forwarded-For is believed
    tls_cert_file: str | None = None  # None: plain HTTP
    tls_key_file: str | None = None
    allow_plaintext: bool = False  # plain HTTP on a non-loopback address (TLS done elsewhere)
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED
    max_lines_per_unit: int = 100_000
    max_line_bytes: int = 1024 * 1024
    request_timeout_ms: int = 30_000  # the whole body must arrive within this, else 408
    # SIGTERM to exit, at most (drain, last tick, lease release); fits Kubernetes' 30 s grace
    shutdown_timeout_ms: int = 25_000
    audit_interval_ms: int = 30_000
    # /metrics needs a token with the read scope; None: only when listening beyond loopback.
    protect_metrics: bool | None = None
    alertmanager_url: str | None = None  # None: no push (the default)
    alertmanager_resend_ms: int = 60_000
    alertmanager_max_per_push: int = 500  # alerts in one push; the rest go in the next ones
    # an absolute http(s) URL each pushed alert carries as `dashboard_url`; None: none
    alertmanager_dashboard_url: str | None = None
    report_schedule: str | None = DEFAULT_REPORT_SCHEDULE  # cron (UTC); None: no nightly job
    report_window_ms: int = 86_400_000
    report_directory: str = "./reports"
    report_formats: tuple[str, ...] = REPORT_FORMATS
    report_retention_ms: int = 30 * 86_400_000
    nats: NatsSource | None = None  # None: no JetStream ingest (the default)
    frontend_tools: tuple[str, ...] = ()  # waits.frontendTools: glob patterns of tool names

    @property
    def decision_labels(self) -> dict[str, Code]:
        """Every policy's own answer labels (lower case), as ingest reads them: a label means
        the same in every policy (`check-config` refuses one mapped both ways)."""
        out = {w.lower(): Code.ACCEPT for p in self.policies for w in p.accept_labels}
        out.update({w.lower(): Code.DECLINE for p in self.policies for w in p.decline_labels})
        return out

    @property
    def heartbeat_gap_ms(self) -> int:
        """The compaction gap the store uses: store.heartbeatCompaction, but never more than
        the smallest heartbeatFreshness of the policies (a span is fresh throughout)."""
        fresh = min((p.thresholds.heartbeat_freshness_ms for p in self.policies), default=0)
        return max(0, min(self.store_heartbeat_compaction_ms, fresh))

    @property
    def metrics_protected(self) -> bool:
        if self.protect_metrics is not None:
            return self.protect_metrics
        return not is_loopback(split_listen(self.listen)[0])


def split_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets) as the host, without brackets, and the port."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_duration(value: Any) -> int:
    """Milliseconds from `90`, `90s`, `5m`, `1h30m`, `7d`, `250ms` (a bare number: seconds)."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 5m or 1h")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("must not be negative")
        return int(value * 1000)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip()) * 1000
    if isinstance(value, str):
        m = _DURATION.match(value.strip())
        if m and any(m.groups()):
            d, h, mi, s, ms = (int(g) if g else 0 for g in m.groups())
            return (((d * 24 + h) * 60 + mi) * 60 + s) * 1000 + ms
    raise ValueError(f"{value!r} is not a duration such as 30s, 5m or 1h")


def listen_problem(listen: Any) -> str | None:
    """What is wrong with a `HOST:PORT` to listen on, as `serve` would find it; None if
    nothing (the address may still be taken, which only binding can tell)."""
    match = _LISTEN.match(listen) if isinstance(listen, str) else None
    if match is None:
        return "must be HOST:PORT, e.g. 127.0.0.1:9477"
    host, port = match[1], int(match[2])
    if not 1 <= port <= 65535:
        return f"port {port} is not between 1 and 65535"
    if host.startswith("[") or re.fullmatch(r"[\d.]+", host):
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return f"{host} is not an IP address"
    return None


_LISTEN = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+):(\d{1,5})$")
