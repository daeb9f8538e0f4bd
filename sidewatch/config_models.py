"""config.yaml as pydantic models: one model per mapping, its camelCase keys as aliases, each
default its record's (`config_values`). A key's `description` is the form its value must take,
for editors (the JSON Schema) and for the problems `config_schema` words. Imported only where a
file is parsed: pydantic would cost `--help` most of its start."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    WithJsonSchema,
)

from sidewatch.config import (
    ENV_DB_URL,
    ENV_REF_KEY,
    ENV_TOKENS,
    INGEST_KINDS,
    Config,
    NatsSource,
    Token,
    listen_problem,
)
from sidewatch.config_values import (
    BYTES,
    CONFIG,
    DASHBOARD,
    GLOBS,
    HOST,
    NATS,
    ORIGIN,
    POLICY,
    THRESHOLDS,
    Bytes,
    Count,
    Duration,
    Flag,
    Given,
    Globs,
    NatsName,
    NonEmpty,
    ToolGlobs,
    at_least,
    checked,
    external_url_problem,
    is_network,
    kinds_problem,
    must,
    nats_url_problem,
    path_or_none,
    schedule_problem,
    token_secret,
    unset,
    unset_if_empty,
)
from sidewatch.core.model import Thresholds
from sidewatch.core.policy import Need, Policy, ReceiptKind


def _yaml(value: Any) -> Any:
    """A default given as the file would give it, validated like the file's own."""
    return value


class Mapped(BaseModel):
    """A mapping of config.yaml: an unknown key is a problem."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    def record(self, given: Given) -> dict[str, Any]:
        """The `Config` fields it sets (a field is named as the record's, a section's fields
        are its parent's)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            out |= value.record(given) if isinstance(value, Mapped) else {name: value}
        return out


# -- store, privacy -------------------------------------------------------------------------


class Store(Mapped):
    """The store: SQLite (embedded, the default) or PostgreSQL."""

    db_url: Annotated[str, Strict(), must(lambda url: "://" in url)] = Field(
        CONFIG.db_url,
        alias="url",
        description="a database URL such as sqlite:///./sidewatch.db",
    )
    store_connect_timeout_ms: Annotated[Duration, at_least(2000)] = Field(
        CONFIG.store_connect_timeout_ms, alias="connectTimeout"
    )
    store_statement_timeout_ms: Annotated[Duration, at_least(100)] = Field(
        CONFIG.store_statement_timeout_ms, alias="statementTimeout"
    )
    store_pool_timeout_ms: Annotated[Duration, at_least(100)] = Field(
        CONFIG.store_pool_timeout_ms, alias="poolTimeout"
    )
    store_pool_size: Count = Field(
        CONFIG.store_pool_size,
        alias="poolSize",
        description="a whole number of connections, at least 1",
    )
    store_prepare_threshold: Annotated[int, Strict(), Field(ge=0)] | None = Field(
        CONFIG.store_prepare_threshold,
        alias="prepareThreshold",
        description="a whole number of runs, or null to never prepare statements on the server "
        "(PgBouncer in transaction mode)",
    )
    store_busy_timeout_ms: Duration = Field(CONFIG.store_busy_timeout_ms, alias="busyTimeout")
    store_retention_ms: Annotated[Duration, at_least(3_600_000, "1h")] = Field(
        CONFIG.store_retention_ms, alias="retention"
    )
    store_heartbeat_compaction_ms: Duration = Field(
        CONFIG.store_heartbeat_compaction_ms, alias="heartbeatCompaction"
    )

    def record(self, given: Given) -> dict[str, Any]:
        return super().record(given) | {"db_url": given.env.get(ENV_DB_URL) or self.db_url}


class Privacy(Mapped):
    """What sidewatch keeps of people and actions."""

    approver_ref_key: Annotated[str, Strict(), Field(min_length=16)] | None = Field(
        CONFIG.approver_ref_key,
        alias="approverRefKey",
        description="a string of at least 16 characters",
    )
    hash_key_file: NonEmpty | None = Field(
        CONFIG.hash_key_file, alias="hashKeyFile", description="a file path"
    )
    action_digest: Literal["plain", "keyed"] = Field(
        "keyed" if CONFIG.keyed_digests else "plain", alias="actionDigest"
    )
    role_prefixes: tuple[NonEmpty, ...] = Field(
        CONFIG.role_prefixes,
        alias="rolePrefixes",
        description="a list of non-empty strings",
    )

    def record(self, given: Given) -> dict[str, Any]:
        return {
            "approver_ref_key": given.env.get(ENV_REF_KEY) or self.approver_ref_key,
            "hash_key_file": self.hash_key_file,
            "keyed_digests": self.action_digest == "keyed",
            "role_prefixes": self.role_prefixes,
        }


# -- policies -------------------------------------------------------------------------------


class Match(Mapped):
    """Glob patterns over the action's tool name and the interrupt reason."""

    tools: Globs = Field(POLICY.tools, description=GLOBS)
    reasons: Globs = Field(POLICY.reasons, description=GLOBS)


LABELS = "a list of non-empty labels"
Labels = Annotated[
    tuple[Annotated[str, Strict(), must(str.strip)], ...],
    AfterValidator(lambda labels: tuple(w.strip().lower() for w in labels)),
]


class Decisions(Mapped):
    """The producer's own answer labels, read before the default decision words."""

    accept_labels: Labels = Field(POLICY.accept_labels, alias="accept", description=LABELS)
    decline_labels: Labels = Field(POLICY.decline_labels, alias="decline", description=LABELS)


class Evidence(Mapped):
    """Which evidence this deployment reports: what is ignored is not waited for."""

    route: Need = Field(POLICY.route)
    handle: Need = Field(POLICY.handle)
    heartbeat: Need = Field(POLICY.heartbeat)


class PolicyEntry(Mapped):
    """A policy: the thresholds and evidence rules for the actions it matches."""

    name: NonEmpty = Field(description="a non-empty string")
    match: Annotated[Match, BeforeValidator(unset)] = Field(
        _yaml({}), description="a mapping with tools and/or reasons"
    )
    decisions: Annotated[Decisions, BeforeValidator(unset)] = Field(
        _yaml({}), description="a mapping of accept and decline to lists of labels"
    )
    resume_grace_ms: Duration = Field(THRESHOLDS.resume_grace_ms, alias="resumeGrace")
    heartbeat_freshness_ms: Duration = Field(
        THRESHOLDS.heartbeat_freshness_ms, alias="heartbeatFreshness"
    )
    route_grace_ms: Duration = Field(THRESHOLDS.route_grace_ms, alias="routeGrace")
    require_acknowledgement: Flag = Field(
        POLICY.require_acknowledgement, alias="requireAcknowledgement"
    )
    receipt: ReceiptKind = Field(POLICY.receipt)
    evidence: Annotated[Evidence, BeforeValidator(unset)] = Field(
        _yaml({}), description="a mapping of route, handle and heartbeat to required or ignored"
    )

    def policy(self) -> Policy:
        return Policy(
            name=self.name,
            thresholds=Thresholds(
                self.resume_grace_ms, self.heartbeat_freshness_ms, self.route_grace_ms
            ),
            tools=self.match.tools,
            reasons=self.match.reasons,
            require_acknowledgement=self.require_acknowledgement,
            receipt=self.receipt,
            route=self.evidence.route,
            handle=self.evidence.handle,
            heartbeat=self.evidence.heartbeat,
            accept_labels=self.decisions.accept_labels,
            decline_labels=self.decisions.decline_labels,
        )


# -- server ---------------------------------------------------------------------------------


class TokenEntry(Mapped):
    """A bearer token and its scopes, given inline, by environment variable or by file; an
    ingest token may be narrowed to the kinds of line its sender produces."""

    name: Annotated[Any, WithJsonSchema({"type": "string"})] = None  # unset: token-N
    scopes: tuple[Literal["ingest", "read"], ...] = Field(
        min_length=1, description="a non-empty list of ingest, read"
    )
    kinds: Annotated[
        tuple[str, ...] | None,
        checked(kinds_problem),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "array", "items": {"enum": list(INGEST_KINDS)}, "minItems": 1},
                    {"type": "null"},  # every kind, as when absent
                ]
            }
        ),
    ] = None
    token: Annotated[Any, WithJsonSchema({"type": "string", "minLength": 16})] = None
    token_env: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(None, alias="tokenEnv")
    token_file: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(None, alias="tokenFile")

    def token_record(self, n: int, given: Given) -> Token:
        secret, _ = token_secret(self.model_dump(by_alias=True, exclude_unset=True), given)
        name = self.name if isinstance(self.name, str) else f"token-{n}"
        kinds = None if self.kinds is None else frozenset(self.kinds)
        return Token(name, secret, frozenset(self.scopes), kinds)


class Tls(Mapped):
    """HTTPS, with a PEM certificate (chain) and its key."""

    # Either file missing or not a path is one problem of the section's (see `agreement`).
    tls_cert_file: Annotated[str | None, BeforeValidator(path_or_none)] = Field(
        CONFIG.tls_cert_file, alias="certFile"
    )
    tls_key_file: Annotated[str | None, BeforeValidator(path_or_none)] = Field(
        CONFIG.tls_key_file, alias="keyFile"
    )


class Server(Mapped):
    """The HTTP server of `sidewatch serve`: its address, tokens, limits and exposure."""

    external_url: Annotated[
        str | None, checked(external_url_problem), AfterValidator(lambda u: u and u.rstrip("/"))
    ] = Field(CONFIG.external_url, alias="externalUrl")
    listen: Annotated[str, checked(listen_problem), WithJsonSchema({"type": "string"})] = Field(
        CONFIG.listen
    )
    request_timeout_ms: Annotated[Duration, at_least(1000)] = Field(
        CONFIG.request_timeout_ms, alias="requestTimeout"
    )
    shutdown_timeout_ms: Annotated[Duration, at_least(1000)] = Field(
        CONFIG.shutdown_timeout_ms, alias="shutdownTimeout"
    )
    tokens: Annotated[tuple[TokenEntry, ...], BeforeValidator(unset)] = Field(
        CONFIG.tokens,
        description="a list of {name, scopes, kinds?, token | tokenEnv | tokenFile}",
    )
    protect_metrics: Flag | None = Field(CONFIG.protect_metrics, alias="protectMetrics")
    max_connections: Count = Field(
        CONFIG.max_connections,
        alias="maxConnections",
        description="a number of connections, at least 1",
    )
    allowed_hosts: Annotated[
        tuple[Annotated[str, Strict(), must(HOST.match)], ...],
        AfterValidator(lambda hosts: tuple(h.lower().strip("[]") for h in hosts)),
    ] = Field(
        CONFIG.allowed_hosts,
        alias="allowedHosts",
        description="a list of host names such as sw.example",
    )
    allowed_origins: Annotated[
        tuple[Annotated[str, Strict(), must(ORIGIN.match)], ...],
        AfterValidator(lambda origins: tuple(o.lower() for o in origins)),
    ] = Field(
        CONFIG.allowed_origins,
        alias="allowedOrigins",
        description="a list of origins such as https://app.example",
    )
    trusted_proxies: Annotated[
        tuple[Annotated[str, Strict(), must(is_network)], ...],
        AfterValidator(
            lambda nets: tuple(str(ipaddress.ip_network(p, strict=False)) for p in nets)
        ),
    ] = Field(
        CONFIG.trusted_proxies,
        alias="trustedProxies",
        description="a list of addresses or CIDRs such as 10.0.0.0/8",
    )
    tls: Annotated[Tls, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    allow_plaintext: Flag = Field(CONFIG.allow_plaintext, alias="allowPlaintext")
    max_body_bytes: Bytes = Field(CONFIG.max_body_bytes, alias="maxBodyBytes", description=BYTES)
    max_inflated_bytes: Bytes = Field(
        CONFIG.max_inflated_bytes, alias="maxInflatedBytes", description=BYTES
    )
    max_lines_per_unit: Count = Field(
        CONFIG.max_lines_per_unit,
        alias="maxLinesPerUnit",
        description="a whole number of lines, at least 1",
    )
    max_line_bytes: Bytes = Field(CONFIG.max_line_bytes, alias="maxLineBytes", description=BYTES)

    def record(self, given: Given) -> dict[str, Any]:
        tokens = [t.token_record(n, given) for n, t in enumerate(self.tokens)]
        for var, scope in ENV_TOKENS.items():
            if len(given.env.get(var) or "") >= 16:
                tokens.append(Token(var.lower(), given.env[var], frozenset({scope})))
        return super().record(given) | {"tokens": tuple(tokens)}


# -- auditor, alertmanager, reports, nats, waits --------------------------------------------


class Auditor(Mapped):
    """The scheduled auditor of `sidewatch serve`."""

    audit_interval_ms: Annotated[Duration, at_least(1000)] = Field(
        CONFIG.audit_interval_ms, alias="interval"
    )


# An absolute http(s) URL (a dashboard's may carry a query): a pattern the JSON Schema holds too.
class Alertmanager(Mapped):
    """Pushes one alert per problem wait to Alertmanager's v2 API (off without a url)."""

    alertmanager_url: Annotated[str, Strict(), must(lambda url: "://" in url)] | None = Field(
        CONFIG.alertmanager_url, alias="url", description="a URL such as http://127.0.0.1:9093"
    )
    alertmanager_max_per_push: Count = Field(
        CONFIG.alertmanager_max_per_push,
        alias="maxAlertsPerPush",
        description="a whole number, at least 1",
    )
    alertmanager_resend_ms: Duration = Field(CONFIG.alertmanager_resend_ms, alias="resendInterval")
    alertmanager_dashboard_url: Annotated[str, Strict(), Field(pattern=DASHBOARD)] | None = Field(
        CONFIG.alertmanager_dashboard_url,
        alias="dashboardUrl",
        description="an absolute http(s) URL such as https://grafana.example/d/sidewatch",
    )


class Reports(Mapped):
    """The nightly audit report (also `sidewatch report`)."""

    report_schedule: Annotated[
        str | None, checked(schedule_problem), WithJsonSchema({"type": ["string", "null"]})
    ] = Field(CONFIG.report_schedule, alias="schedule")
    report_directory: NonEmpty = Field(
        CONFIG.report_directory, alias="directory", description="a path"
    )
    report_formats: tuple[Literal["md", "html", "json"], ...] = Field(
        CONFIG.report_formats,
        alias="formats",
        min_length=1,
        description="a list of md, html, json",
    )
    report_window_ms: Duration = Field(CONFIG.report_window_ms, alias="window")
    report_retention_ms: Duration = Field(CONFIG.report_retention_ms, alias="retention")


class Nats(Mapped):
    """Ingest from a NATS JetStream stream as well (off without the section)."""

    url: Annotated[str | None, checked(nats_url_problem), WithJsonSchema({"type": "string"})] = None
    stream: NatsName = Field(
        description="the name of an existing stream: 1 to 128 letters, digits, _ or -"
    )
    durable: NatsName = Field(
        NATS.durable,
        description="the durable consumer's name: 1 to 128 letters, digits, _ or -",
    )
    subject: (
        Annotated[str, Strict(), must(lambda s: s and not any(c.isspace() for c in s))] | None
    ) = Field(NATS.subject, description="a subject such as agui.> (no spaces), or unset")
    batch: Annotated[int, Strict(), Field(ge=1, le=1000)] = Field(
        NATS.batch, description="a whole number of messages from 1 to 1000"
    )
    ack_wait_ms: Annotated[Duration, at_least(1000)] = Field(NATS.ack_wait_ms, alias="ackWait")
    retry_delay_ms: Annotated[Duration, at_least(100, "100ms")] = Field(
        NATS.retry_delay_ms, alias="retryDelay"
    )


class Waits(Mapped):
    """How waits are read."""

    frontend_tools: ToolGlobs = Field(
        CONFIG.frontend_tools, alias="frontendTools", description=GLOBS
    )


# -- the file -------------------------------------------------------------------------------


class ConfigFile(Mapped):
    """sidewatch's config.yaml. Every key is optional."""

    model_config = ConfigDict(title="sidewatch configuration")

    store: Annotated[Store, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    privacy: Annotated[Privacy, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    policies: Annotated[tuple[PolicyEntry, ...], BeforeValidator(unset)] = Field(
        _yaml([{"name": p.name} for p in Config().policies]),  # its other keys: their defaults
        min_length=1,
        description="a non-empty list (first match wins, last is default)",
    )
    server: Annotated[Server, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    auditor: Annotated[Auditor, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    alertmanager: Annotated[Alertmanager, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    reports: Annotated[Reports, BeforeValidator(unset_if_empty)] = Field(_yaml({}))
    nats: Annotated[Nats | None, BeforeValidator(lambda v: v or None)] = Field(CONFIG.nats)
    waits: Annotated[Waits, BeforeValidator(unset_if_empty)] = Field(_yaml({}))

    def record(self, given: Given) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policies": tuple(p.policy() for p in self.policies),
            "nats": self.nats and NatsSource(**self.nats.record(given)),
        }
        for name in type(self).model_fields.keys() - out.keys():
            out |= getattr(self, name).record(given)
        return out
