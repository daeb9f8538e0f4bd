"""Configuration: a pure `load_config(data, env)` that returns a frozen `Config` or raises one
`ConfigError` listing every problem. The shell (`read_config_file`) only reads the YAML."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from sidewatch.core.model import Code, Thresholds
from sidewatch.core.policy import DEFAULT_THRESHOLDS, Need, Policy, ReceiptKind
from sidewatch.errors import ConfigError

E = TypeVar("E")

DEFAULT_DB_URL = "sqlite:///./sidewatch.db"
DEFAULT_LISTEN = "127.0.0.1:9477"
DEFAULT_REPORT_SCHEDULE = "0 0 * * *"  # nightly, UTC
REPORT_FORMATS = ("md", "html", "json")
DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_MAX_INFLATED = 64 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 1024
SCOPES = frozenset({"ingest", "read"})
ENV_TOKENS = {"SIDEWATCH_INGEST_TOKEN": "ingest", "SIDEWATCH_READ_TOKEN": "read"}
DEFAULT_ROLE_PREFIXES = ("role:", "policy:", "group:", "team:", "queue:", "service:")
ENV_DB_URL = "SIDEWATCH_DB_URL"
ENV_REF_KEY = "SIDEWATCH_APPROVER_REF_KEY"
ENV_NATS_URL = "SIDEWATCH_NATS_URL"
NATS_SCHEMES = ("nats://", "tls://", "ws://", "wss://")

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token and what it may do (`ingest`, `read`)."""

    name: str
    secret: str = field(repr=False)
    scopes: frozenset[str]


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
    store_retention_ms: int = (
        30 * 86_400_000
    )  # closed waits, units, stray evidence (store.retention)
    policies: tuple[Policy, ...] = (Policy(name="default", thresholds=DEFAULT_THRESHOLDS),)
    approver_ref_key: str | None = None  # None: the key in `hash_key_file` (generated)
    hash_key_file: str | None = None  # None: `<file>.key` beside an SQLite store (see README)
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
    report_schedule: str | None = DEFAULT_REPORT_SCHEDULE  # cron (UTC); None: no nightly job
    report_window_ms: int = 86_400_000
    report_directory: str = "./reports"
    report_formats: tuple[str, ...] = REPORT_FORMATS
    report_retention_ms: int = 30 * 86_400_000
    nats: NatsSource | None = None  # None: no JetStream ingest (the default)

    @property
    def decision_labels(self) -> dict[str, Code]:
        """Every policy's own answer labels (lower case), as ingest reads them: a label means
        the same in every policy (`check-config` refuses one mapped both ways)."""
        out = {w.lower(): Code.ACCEPT for p in self.policies for w in p.accept_labels}
        out.update({w.lower(): Code.DECLINE for p in self.policies for w in p.decline_labels})
        return out

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


_TOP_KEYS = {
    "store",
    "policies",
    "privacy",
    "server",
    "auditor",
    "alertmanager",
    "reports",
    "nats",
}
_POLICY_KEYS = {
    "name",
    "match",
    "resumeGrace",
    "heartbeatFreshness",
    "routeGrace",
    "requireAcknowledgement",
    "receipt",
    "evidence",
    "decisions",
}


def load_config(
    data: Mapping[str, Any] | None,
    env: Mapping[str, str],
    source: str = "config",
    files: Mapping[str, str | None] | None = None,
) -> Config:
    """The frozen config from parsed YAML (None: no file), the environment, and the contents of
    the token files it names (`files`: path -> content, None when unreadable; read by the
    shell with `read_token_files`)."""
    problems: list[str] = []
    data = data or {}
    if not isinstance(data, Mapping):
        raise ConfigError(["the file must hold a mapping at its top level"], source)
    for name in sorted(set(data) - _TOP_KEYS):
        problems.append(f"{name}: unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    fields: dict[str, Any] = {**_store(data, env, problems), **_privacy(data, env, problems)}
    fields["policies"] = _policies(data.get("policies"), problems)
    fields.update(_server(data, env, problems, files or {}))
    for reader in (_auditor, _alertmanager, _reports, _nats):
        fields.update(reader(data, env, problems))
    if problems:
        raise ConfigError(problems, source)
    return Config(**fields)


Section = dict[str, Any]


def _keys(section: Mapping[str, Any], name: str, known: set[str], problems: list[str]) -> None:
    for key in sorted(set(section) - known):
        problems.append(f"{name}.{key}: unknown key")


def _store(data: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> Section:
    store = _section(data, "store", problems)
    known = {"url", "busyTimeout", "connectTimeout", "statementTimeout", "poolSize"}
    _keys(store, "store", known | {"poolTimeout", "prepareThreshold", "retention"}, problems)
    db_url = store.get("url", DEFAULT_DB_URL)
    if not isinstance(db_url, str) or "://" not in db_url:
        problems.append("store.url: must be a database URL such as sqlite:///./sidewatch.db")
        db_url = DEFAULT_DB_URL
    timeouts = {}
    for key, name, default, least in (
        ("connectTimeout", "store_connect_timeout_ms", 5_000, 2_000),
        ("statementTimeout", "store_statement_timeout_ms", 15_000, 100),
        ("poolTimeout", "store_pool_timeout_ms", 5_000, 100),
    ):
        timeouts[name] = _dur(store, key, default, "store", problems)
        if timeouts[name] < least:
            problems.append(f"store.{key}: must be at least {least / 1000:g}s")
    pool = store.get("poolSize", 10)
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
        problems.append("store.poolSize: must be a whole number of connections, at least 1")
        pool = 10
    threshold = store.get("prepareThreshold", 5)
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
    ):
        problems.append(
            "store.prepareThreshold: must be a whole number of runs, or null to never prepare "
            "statements on the server (PgBouncer in transaction mode)"
        )
        threshold = 5
    retention = _dur(store, "retention", 30 * 86_400_000, "store", problems)
    if retention < 3_600_000:
        problems.append("store.retention: must be at least 1h")
        retention = 30 * 86_400_000
    return {
        "db_url": env.get(ENV_DB_URL) or db_url,
        "store_busy_timeout_ms": _dur(store, "busyTimeout", 10_000, "store", problems),
        **timeouts,
        "store_pool_size": pool,
        "store_prepare_threshold": threshold,
        "store_retention_ms": retention,
    }


def _privacy(data: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> Section:
    privacy = _section(data, "privacy", problems)
    known = {"approverRefKey", "hashKeyFile", "actionDigest", "rolePrefixes"}
    _keys(privacy, "privacy", known, problems)
    key = privacy.get("approverRefKey")
    if key is not None and (not isinstance(key, str) or len(key) < 16):
        problems.append("privacy.approverRefKey: must be a string of at least 16 characters")
        key = None
    key_file = privacy.get("hashKeyFile")
    if key_file is not None and (not isinstance(key_file, str) or not key_file):
        problems.append("privacy.hashKeyFile: must be a file path")
        key_file = None
    digest = privacy.get("actionDigest", "plain")
    if digest not in ("plain", "keyed"):
        problems.append("privacy.actionDigest: must be plain or keyed")
    prefixes = privacy.get("rolePrefixes", list(DEFAULT_ROLE_PREFIXES))
    if not isinstance(prefixes, list) or not all(isinstance(p, str) and p for p in prefixes):
        problems.append("privacy.rolePrefixes: must be a list of non-empty strings")
        prefixes = list(DEFAULT_ROLE_PREFIXES)
    return {
        "approver_ref_key": env.get(ENV_REF_KEY) or key,
        "hash_key_file": key_file,
        "keyed_digests": digest == "keyed",
        "role_prefixes": tuple(prefixes),
    }


def _server(
    data: Mapping[str, Any],
    env: Mapping[str, str],
    problems: list[str],
    files: Mapping[str, str | None],
) -> Section:
    server = _section(data, "server", problems)
    known = {
        "listen",
        "tokens",
        "maxBodyBytes",
        "maxInflatedBytes",
        "protectMetrics",
        "maxLinesPerUnit",
        "maxLineBytes",
        "requestTimeout",
        "maxConnections",
        "allowedHosts",
        "allowedOrigins",
        "trustedProxies",
        "tls",
        "allowPlaintext",
        "externalUrl",
        "shutdownTimeout",
    }
    _keys(server, "server", known, problems)
    external = server.get("externalUrl")
    if external is not None and (not isinstance(external, str) or not _EXTERNAL.match(external)):
        problems.append(
            "server.externalUrl: must be an http(s) URL without query, e.g. https://sw.example"
        )
        external = None
    listen = server.get("listen", DEFAULT_LISTEN)
    if (problem := listen_problem(listen)) is not None:
        problems.append(f"server.listen: {problem}")
        listen = DEFAULT_LISTEN
    timeout = _dur(server, "requestTimeout", 30_000, "server", problems)
    if timeout < 1000:
        problems.append("server.requestTimeout: must be at least 1s")
    shutdown = _dur(server, "shutdownTimeout", 25_000, "server", problems)
    if shutdown < 1000:
        problems.append("server.shutdownTimeout: must be at least 1s")
    return {
        "shutdown_timeout_ms": shutdown,
        "listen": listen,
        "tokens": _tokens(server.get("tokens"), env, files, problems),
        "protect_metrics": (
            _flag(server, "protectMetrics", "server", problems)
            if server.get("protectMetrics") is not None
            else None
        ),
        "max_connections": _whole(
            server, "maxConnections", DEFAULT_MAX_CONNECTIONS, problems, 1, "number of connections"
        ),
        **_exposure(server, problems),
        "max_body_bytes": _size(server, "maxBodyBytes", DEFAULT_MAX_BODY, problems),
        "max_inflated_bytes": _size(server, "maxInflatedBytes", DEFAULT_MAX_INFLATED, problems),
        "max_lines_per_unit": _lines(server, "maxLinesPerUnit", 100_000, problems),
        "max_line_bytes": _size(server, "maxLineBytes", 1024 * 1024, problems),
        "request_timeout_ms": timeout,
        "external_url": external.rstrip("/") if external else None,
    }


_EXTERNAL = re.compile(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", re.IGNORECASE)
_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)$")
_ORIGIN = re.compile(r"^https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)(:\d{1,5})?$", re.IGNORECASE)


def _exposure(server: Mapping[str, Any], problems: list[str]) -> Section:
    """Who may reach the server and how: Host names, browser origins, trusted proxies, TLS."""
    hosts = _strings(server, "allowedHosts", _HOST.match, "host names such as sw.example", problems)
    origins = _strings(
        server, "allowedOrigins", _ORIGIN.match, "origins such as https://app.example", problems
    )
    proxies = _strings(
        server, "trustedProxies", _network, "addresses or CIDRs such as 10.0.0.0/8", problems
    )
    tls = _section(server, "tls", problems)
    _keys(tls, "server.tls", {"certFile", "keyFile"}, problems)
    files = [tls.get(k) for k in ("certFile", "keyFile")]
    if tls and not all(isinstance(f, str) and f for f in files):
        problems.append("server.tls: needs both certFile and keyFile (paths to PEM files)")
        files = [None, None]
    return {
        "allowed_hosts": tuple(h.lower().strip("[]") for h in hosts),
        "allowed_origins": tuple(o.lower() for o in origins),
        "trusted_proxies": tuple(str(ipaddress.ip_network(p, strict=False)) for p in proxies),
        "tls_cert_file": files[0],
        "tls_key_file": files[1],
        "allow_plaintext": _flag(server, "allowPlaintext", "server", problems),
    }


def _network(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _strings(
    section: Mapping[str, Any],
    key: str,
    valid: Callable[[str], object],
    rule: str,
    problems: list[str],
) -> list[str]:
    """server.`key`: a list of strings that are each `valid` (empty when absent or bad)."""
    v = section.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and valid(x) for x in v):
        problems.append(f"server.{key}: must be a list of {rule}")
        return []
    return v


def _auditor(data: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> Section:
    auditor = _section(data, "auditor", problems)
    _keys(auditor, "auditor", {"interval"}, problems)
    interval = _dur(auditor, "interval", 30_000, "auditor", problems)
    if interval < 1000:
        problems.append("auditor.interval: must be at least 1s")
    return {"audit_interval_ms": interval}


def _alertmanager(data: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> Section:
    am = _section(data, "alertmanager", problems)
    _keys(am, "alertmanager", {"url", "resendInterval", "maxAlertsPerPush"}, problems)
    url = am.get("url")
    if url is not None and (not isinstance(url, str) or "://" not in url):
        problems.append("alertmanager.url: must be a URL such as http://127.0.0.1:9093")
        url = None
    per_push = am.get("maxAlertsPerPush", 500)
    if isinstance(per_push, bool) or not isinstance(per_push, int) or per_push < 1:
        problems.append("alertmanager.maxAlertsPerPush: must be a whole number, at least 1")
        per_push = 500
    return {
        "alertmanager_url": url,
        "alertmanager_resend_ms": _dur(am, "resendInterval", 60_000, "alertmanager", problems),
        "alertmanager_max_per_push": per_push,
    }


def _reports(data: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> Section:
    reports = _section(data, "reports", problems)
    _keys(reports, "reports", {"schedule", "window", "directory", "formats", "retention"}, problems)
    schedule = reports.get("schedule", DEFAULT_REPORT_SCHEDULE)
    if schedule is not None and (not isinstance(schedule, str) or len(schedule.split()) != 5):
        problems.append("reports.schedule: must be a 5-field cron expression, or null for off")
        schedule = None
    elif schedule is not None and (problem := _cron_problem(schedule)) is not None:
        problems.append(f"reports.schedule: {problem}")
        schedule = None
    directory = reports.get("directory", "./reports")
    if not isinstance(directory, str) or not directory:
        problems.append("reports.directory: must be a path")
        directory = "./reports"
    formats = reports.get("formats", list(REPORT_FORMATS))
    if not isinstance(formats, list) or not formats or not set(formats) <= set(REPORT_FORMATS):
        problems.append("reports.formats: must be a list of md, html, json")
        formats = list(REPORT_FORMATS)
    return {
        "report_schedule": schedule,
        "report_window_ms": _dur(reports, "window", 86_400_000, "reports", problems),
        "report_directory": directory,
        "report_formats": tuple(formats),
        "report_retention_ms": _dur(reports, "retention", 30 * 86_400_000, "reports", problems),
    }


def _cron_problem(schedule: str) -> str | None:
    """The parser `serve` schedules the nightly report with, so that a cron it would refuse
    is a config problem (APScheduler's own message: "Error validating expression '61'")."""
    from apscheduler.triggers.cron import CronTrigger  # noqa: PLC0415 (only with a schedule)

    try:
        CronTrigger.from_crontab(schedule, timezone="UTC")
    except ValueError as e:
        return f"{schedule!r} is not a valid cron expression: {e}"
    return None


_NATS_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_NATS_KEYS = {"url", "stream", "subject", "durable", "batch", "ackWait", "retryDelay"}


def _nats(data: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> Section:
    nats = _section(data, "nats", problems)
    _keys(nats, "nats", _NATS_KEYS, problems)
    url = env.get(ENV_NATS_URL) or nats.get("url")
    if url is None:
        if nats:
            problems.append("nats.url: required to ingest from JetStream (or remove the section)")
        return {"nats": None}
    n = len(problems)
    if not isinstance(url, str) or not url.startswith(NATS_SCHEMES):
        # Never the value itself: the URL may hold a password.
        problems.append("nats.url: must be a URL such as nats://127.0.0.1:4222")
    names = {}
    for key, default, rule in (
        ("stream", None, "required, the name of an existing stream"),
        ("durable", "sidewatch", "the durable consumer's name"),
    ):
        name = nats.get(key, default)
        if not isinstance(name, str) or not _NATS_NAME.match(name):
            problems.append(f"nats.{key}: {rule}: 1 to 128 letters, digits, _ or -")
        names[key] = name
    subject = nats.get("subject")
    if subject is not None and (
        not isinstance(subject, str) or not subject or any(c.isspace() for c in subject)
    ):
        problems.append("nats.subject: must be a subject such as agui.> (no spaces), or unset")
    batch = nats.get("batch", 64)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000:
        problems.append("nats.batch: must be a whole number of messages from 1 to 1000")
    ack_wait = _dur(nats, "ackWait", 60_000, "nats", problems)
    if ack_wait < 1000:
        problems.append("nats.ackWait: must be at least 1s")
    retry = _dur(nats, "retryDelay", 5_000, "nats", problems)
    if retry < 100:
        problems.append("nats.retryDelay: must be at least 100ms")
    if len(problems) > n:
        return {"nats": None}
    return {
        "nats": NatsSource(url, names["stream"], names["durable"], subject, batch, ack_wait, retry)
    }


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


def _whole(
    section: Mapping[str, Any], key: str, default: int, problems: list[str], least: int, unit: str
) -> int:
    """server.`key`: a whole number of `unit`, at least `least` (the default when absent)."""
    v = section.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        problems.append(f"server.{key}: must be a {unit}, at least {least}")
        return default
    return v


def _size(section: Mapping[str, Any], key: str, default: int, problems: list[str]) -> int:
    return _whole(section, key, default, problems, 1024, "number of bytes")


def _lines(section: Mapping[str, Any], key: str, default: int, problems: list[str]) -> int:
    return _whole(section, key, default, problems, 1, "whole number of lines")


def _tokens(
    raw: Any, env: Mapping[str, str], files: Mapping[str, str | None], problems: list[str]
) -> tuple[Token, ...]:
    out: list[Token] = []
    if raw is not None and not isinstance(raw, list):
        problems.append(
            "server.tokens: must be a list of {name, scopes, token | tokenEnv | tokenFile}"
        )
        raw = []
    for n, item in enumerate(raw or []):
        where = f"server.tokens[{n}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: must be a mapping")
            continue
        for k in sorted(set(item) - {"name", "scopes", "token", "tokenEnv", "tokenFile"}):
            problems.append(f"{where}.{k}: unknown key")
        name = item.get("name") if isinstance(item.get("name"), str) else f"token-{n}"
        scopes = item.get("scopes")
        if not isinstance(scopes, list) or not scopes or not set(scopes) <= SCOPES:
            problems.append(f"{where}.scopes: must be a non-empty list of ingest, read")
            scopes = []
        secret = item.get("token")
        indirect = "tokenEnv" in item or "tokenFile" in item
        if "tokenEnv" in item:
            secret = env.get(str(item["tokenEnv"]))
            if not secret:
                problems.append(f"{where}.tokenEnv: the variable {item['tokenEnv']} is not set")
        elif "tokenFile" in item:
            secret = files.get(str(item["tokenFile"]))
            if secret is None:
                problems.append(f"{where}.tokenFile: cannot read {item['tokenFile']}")
            else:
                secret = secret.strip()
        if not isinstance(secret, str) or len(secret) < 16:
            if not indirect or secret:
                problems.append(f"{where}: the token must be at least 16 characters")
            continue
        out.append(Token(str(name), secret, frozenset(scopes)))
    for var, scope in ENV_TOKENS.items():
        if env.get(var):
            if len(env[var]) < 16:
                problems.append(f"{var}: must be at least 16 characters")
            else:
                out.append(Token(var.lower(), env[var], frozenset({scope})))
    return tuple(out)


def _section(data: Mapping[str, Any], name: str, problems: list[str]) -> Mapping[str, Any]:
    value = data.get(name) or {}
    if not isinstance(value, Mapping):
        problems.append(f"{name}: must be a mapping")
        return {}
    return value


def _policies(raw: Any, problems: list[str]) -> tuple[Policy, ...]:
    if raw is None:
        return (Policy(name="default", thresholds=DEFAULT_THRESHOLDS),)
    if not isinstance(raw, list) or not raw:
        problems.append("policies: must be a non-empty list (first match wins, last is default)")
        return ()
    out: list[Policy] = []
    names: set[str] = set()
    for n, item in enumerate(raw):
        where = f"policies[{n}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: must be a mapping")
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: required, a non-empty string")
            name = f"policy-{n}"
        elif name in names:
            problems.append(f"{where}.name: {name!r} is used twice")
        names.add(name)
        where = f"policies[{n}] ({name})"
        for key in sorted(set(item) - _POLICY_KEYS):
            problems.append(f"{where}.{key}: unknown key")
        tools, reasons = _match(item.get("match"), where, problems)
        if n == len(raw) - 1 and (tools or reasons):
            problems.append(f"{where}: the last policy is the default and must have no match")
        accept, decline = _decisions(item.get("decisions"), where, problems)
        out.append(
            Policy(
                name=name,
                thresholds=Thresholds(
                    resume_grace_ms=_dur(
                        item, "resumeGrace", DEFAULT_THRESHOLDS.resume_grace_ms, where, problems
                    ),
                    heartbeat_freshness_ms=_dur(
                        item,
                        "heartbeatFreshness",
                        DEFAULT_THRESHOLDS.heartbeat_freshness_ms,
                        where,
                        problems,
                    ),
                    route_grace_ms=_dur(
                        item, "routeGrace", DEFAULT_THRESHOLDS.route_grace_ms, where, problems
                    ),
                ),
                tools=tools,
                reasons=reasons,
                require_acknowledgement=_flag(item, "requireAcknowledgement", where, problems),
                receipt=_choice(
                    item.get("receipt", "run_started"),
                    ReceiptKind,
                    f"{where}.receipt",
                    problems,
                    ReceiptKind.RUN_STARTED,
                ),
                **_needs(item.get("evidence"), where, problems),
                accept_labels=accept,
                decline_labels=decline,
            )
        )
    _labels_agree(out, problems)
    return tuple(out)


def _decisions(
    raw: Any, where: str, problems: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`decisions: {accept: [...], decline: [...]}`: a producer's own answer labels."""
    if raw is None:
        return (), ()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}.decisions: must map accept/decline to lists of labels")
        return (), ()
    for key in sorted(set(raw) - {"accept", "decline"}):
        problems.append(f"{where}.decisions.{key}: unknown key (known: accept, decline)")
    out: list[tuple[str, ...]] = []
    for key in ("accept", "decline"):
        v = raw.get(key, [])
        if not isinstance(v, list) or not all(isinstance(w, str) and w.strip() for w in v):
            problems.append(f"{where}.decisions.{key}: must be a list of non-empty labels")
            v = []
        out.append(tuple(w.strip().lower() for w in v))
    return out[0], out[1]


def _labels_agree(policies: list[Policy], problems: list[str]) -> None:
    """A label is read at ingest, before the wait's policy is known: it must mean one thing."""
    accept = {w: p.name for p in policies for w in p.accept_labels}
    for p in policies:
        for w in p.decline_labels:
            if w in accept:
                problems.append(
                    f"policies ({p.name}, {accept[w]}).decisions: {w!r} is both accept and decline"
                )


def _match(raw: Any, where: str, problems: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if raw is None:
        return (), ()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}.match: must be a mapping with tools and/or reasons")
        return (), ()
    out: list[tuple[str, ...]] = []
    for key in ("tools", "reasons"):
        v = raw.get(key, [])
        if not isinstance(v, list) or not all(isinstance(p, str) and p for p in v):
            problems.append(f"{where}.match.{key}: must be a list of glob patterns")
            v = []
        out.append(tuple(v))
    for key in sorted(set(raw) - {"tools", "reasons"}):
        problems.append(f"{where}.match.{key}: unknown key (known: tools, reasons)")
    return out[0], out[1]


def _dur(item: Mapping[str, Any], key: str, default: int, where: str, problems: list[str]) -> int:
    if key not in item:
        return default
    try:
        return parse_duration(item[key])
    except ValueError as e:
        problems.append(f"{where}.{key}: {e}")
        return default


def _flag(item: Mapping[str, Any], key: str, where: str, problems: list[str]) -> bool:
    v = item.get(key, False)
    if not isinstance(v, bool):
        problems.append(f"{where}.{key}: must be true or false")
        return False
    return v


def _choice(raw: Any, enum: Any, where: str, problems: list[str], default: E) -> E:
    try:
        return enum(raw)  # type: ignore[no-any-return]
    except ValueError:
        problems.append(f"{where}: must be one of {', '.join(e.value for e in enum)}")
        return default


def _needs(raw: Any, where: str, problems: list[str]) -> dict[str, Need]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}.evidence: must map route/handle/heartbeat to required|ignored")
        return {}
    out: dict[str, Need] = {}
    for key, value in raw.items():
        if key not in ("route", "handle", "heartbeat"):
            problems.append(
                f"{where}.evidence.{key}: unknown item (known: route, handle, heartbeat)"
            )
            continue
        out[key] = _choice(value, Need, f"{where}.evidence.{key}", problems, Need.REQUIRED)
    return out


def read_token_files(data: Mapping[str, Any] | None) -> dict[str, str | None]:
    """The contents of every `tokenFile` the parsed config names (None: unreadable)."""
    out: dict[str, str | None] = {}
    server = data.get("server") if isinstance(data, Mapping) else None
    tokens = server.get("tokens") if isinstance(server, Mapping) else None
    for item in tokens if isinstance(tokens, list) else []:
        path = item.get("tokenFile") if isinstance(item, Mapping) else None
        if isinstance(path, str):
            try:
                out[path] = Path(path).read_text(encoding="utf-8")
            except OSError:
                out[path] = None
    return out


def read_config_file(path: str | None) -> Mapping[str, Any] | None:
    """The parsed YAML of `path` (None: no file). Raises ConfigError when unreadable."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([f"cannot read: {e.strerror or e}"], source=path) from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError([f"not valid YAML: {e}".replace("\n", " ")], source=path) from e
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(["the file must hold a mapping at its top level"], source=path)
    return data
