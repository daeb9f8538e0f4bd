"""What a SIGHUP may change in a running daemon: the config keys read afresh at each request
or tick are taken from the new file; a change to any other key needs a restart, and is
refused by its name while the old value stays in force."""

from __future__ import annotations

import dataclasses
from typing import Any

from sidewatch.config import Config

# Read afresh at every request, tick or report: a new value takes effect at once.
RELOADABLE = frozenset(
    {
        "policies",
        "tokens",
        "max_body_bytes",
        "max_inflated_bytes",
        "max_lines_per_unit",
        "max_line_bytes",
        "report_window_ms",
        "report_directory",
        "report_formats",
        "report_retention_ms",
        # read by ingest, unit by unit: units ingested afterwards read the new patterns (what
        # was ingested before is not read again; docs/internals/interpretations/)
        "frontend_tools",
    }
)

# A Config attribute's key in the YAML file, for the log line that names it.
KEYS = {
    "db_url": "store.url",
    "store_busy_timeout_ms": "store.busyTimeout",
    "store_connect_timeout_ms": "store.connectTimeout",
    "store_statement_timeout_ms": "store.statementTimeout",
    "store_pool_size": "store.poolSize",
    "store_pool_timeout_ms": "store.poolTimeout",
    "store_prepare_threshold": "store.prepareThreshold",
    "store_heartbeat_compaction_ms": "store.heartbeatCompaction",
    "approver_ref_key": "privacy.approverRefKey",
    "hash_key_file": "privacy.hashKeyFile",
    "keyed_digests": "privacy.actionDigest",
    "role_prefixes": "privacy.rolePrefixes",
    "listen": "server.listen",
    "external_url": "server.externalUrl",
    "tokens": "server.tokens",
    "allowed_hosts": "server.allowedHosts",
    "allowed_origins": "server.allowedOrigins",
    "max_connections": "server.maxConnections",
    "trusted_proxies": "server.trustedProxies",
    "tls_cert_file": "server.tls.certFile",
    "tls_key_file": "server.tls.keyFile",
    "allow_plaintext": "server.allowPlaintext",
    "max_body_bytes": "server.maxBodyBytes",
    "max_inflated_bytes": "server.maxInflatedBytes",
    "max_lines_per_unit": "server.maxLinesPerUnit",
    "max_line_bytes": "server.maxLineBytes",
    "request_timeout_ms": "server.requestTimeout",
    "shutdown_timeout_ms": "server.shutdownTimeout",
    "protect_metrics": "server.protectMetrics",
    "audit_interval_ms": "auditor.interval",
    "alertmanager_url": "alertmanager.url",
    "alertmanager_resend_ms": "alertmanager.resendInterval",
    "alertmanager_max_per_push": "alertmanager.maxAlertsPerPush",
    "alertmanager_dashboard_url": "alertmanager.dashboardUrl",
    "report_schedule": "reports.schedule",
    "report_window_ms": "reports.window",
    "report_directory": "reports.directory",
    "report_formats": "reports.formats",
    "report_retention_ms": "reports.retention",
    "nats": "nats",
    "frontend_tools": "waits.frontendTools",
}


def _names(config: Config) -> list[str]:
    """The config's attributes (a dataclass's fields, or a pydantic model's)."""
    if dataclasses.is_dataclass(config):
        return [f.name for f in dataclasses.fields(config)]
    return list(type(config).model_fields)


def _with(config: Config, changes: dict[str, Any]) -> Config:
    if dataclasses.is_dataclass(config):
        return dataclasses.replace(config, **changes)
    return config.model_copy(update=changes)


def key_of(name: str) -> str:
    return KEYS.get(name, name)


def reloaded(old: Config, new: Config) -> tuple[Config, list[str], list[str]]:
    """The config in force after a reload from `new`: (it, the keys taken from `new`, the
    changed keys that need a restart, keeping their old values). Tokens may be replaced but
    not added where there were none or all removed: whether any is configured decides where
    the server may listen and what it protects."""
    taken: dict[str, Any] = {}
    refused: list[str] = []
    for name in _names(old):
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        if name not in RELOADABLE or (name == "tokens" and bool(before) != bool(after)):
            refused.append(key_of(name))
        else:
            taken[name] = after
    return _with(old, taken), [key_of(n) for n in taken], refused
