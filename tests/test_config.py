"""The pure config loader: defaults, the example file, the environment, every problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sidewatch.config import DEFAULT_DB_URL, Config, NatsSource, parse_duration
from sidewatch.config_schema import load_config, read_token_files
from sidewatch.core.model import Code
from sidewatch.core.policy import Need, ReceiptKind
from sidewatch.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "config.example.yaml"


def test_no_config_at_all_gives_the_defaults() -> None:
    cfg = load_config(None, {})

    assert Config() == cfg
    assert DEFAULT_DB_URL == cfg.db_url


def test_the_example_config_loads_and_documents_the_defaults() -> None:
    cfg = load_config(yaml.safe_load(EXAMPLE.read_text()), {})

    default = cfg.policies[-1]
    assert ["content-preview", "production-change", "default"] == [p.name for p in cfg.policies]
    assert Config().policies[0] == default
    defaults = Config()
    assert (
        defaults.listen,
        (),
        defaults.max_body_bytes,
        defaults.max_inflated_bytes,
        defaults.audit_interval_ms,
        defaults.request_timeout_ms,
    ) == (
        cfg.listen,
        cfg.tokens,
        cfg.max_body_bytes,
        cfg.max_inflated_bytes,
        cfg.audit_interval_ms,
        cfg.request_timeout_ms,
    )
    assert (
        defaults.report_schedule,
        defaults.report_window_ms,
        defaults.report_directory,
        defaults.report_formats,
        defaults.report_retention_ms,
        defaults.alertmanager_url,
        defaults.store_retention_ms,
    ) == (
        cfg.report_schedule,
        cfg.report_window_ms,
        cfg.report_directory,
        cfg.report_formats,
        cfg.report_retention_ms,
        cfg.alertmanager_url,
        cfg.store_retention_ms,
    )
    prod = cfg.policies[1]
    assert (3_600_000, True, ReceiptKind.TOOL_RESULT, ("deploy_*", "rotate_*")) == (
        prod.thresholds.resume_grace_ms,
        prod.require_acknowledgement,
        prod.receipt,
        prod.tools,
    )
    assert {"ship_it": Code.ACCEPT, "hold_for_window": Code.DECLINE} == cfg.decision_labels


def test_the_example_nats_section_uncommented_gives_its_defaults() -> None:
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index("# nats:")
    block = "\n".join(
        line.removeprefix("# ")
        for line in lines[start : lines.index("", start)]
        if not line.startswith("#   #")
    )

    cfg = load_config(yaml.safe_load(block), {})

    assert NatsSource("nats://127.0.0.1:4222", "SIDEWATCH", subject="agui.>") == cfg.nats
    assert (None, "sidewatch", 64, 60_000, 5_000) == (
        load_config(None, {}).nats,
        *(getattr(cfg.nats, k) for k in ("durable", "batch", "ack_wait_ms", "retry_delay_ms")),
    )


def test_the_nats_url_can_come_from_the_environment_and_is_never_shown() -> None:
    url = "nats://sidewatch:s3cret-pass@nats.internal:4222"

    cfg = load_config({"nats": {"stream": "AGUI"}}, {"SIDEWATCH_NATS_URL": url})

    assert cfg.nats is not None
    assert (url, "AGUI") == (cfg.nats.url, cfg.nats.stream)
    assert "s3cret" not in repr(cfg)


def test_the_store_retention_is_a_duration_of_at_least_an_hour() -> None:
    week = load_config({"store": {"retention": "7d"}}, {})

    with pytest.raises(ConfigError) as err:
        load_config({"store": {"retention": "30m"}}, {})

    assert (30 * 86_400_000, 7 * 86_400_000) == (
        Config().store_retention_ms,
        week.store_retention_ms,
    )
    assert ["store.retention: must be at least 1h"] == err.value.problems


def test_every_nats_problem_is_reported_at_once() -> None:
    data = {
        "nats": {
            "url": "http://user:pw@host:4222",
            "stream": "a.b",
            "durable": "",
            "subject": "agui >",
            "batch": 0,
            "ackWait": "10ms",
            "retryDelay": "soon",
            "queue": "x",
        }
    }

    with pytest.raises(ConfigError) as err:
        load_config(data, {})

    assert [
        "nats.queue: unknown key (known: ackWait, batch, durable, retryDelay, stream, subject, "
        "url)",
        "nats.url: must be a URL such as nats://127.0.0.1:4222",
        "nats.stream: must be the name of an existing stream: 1 to 128 letters, digits, _ or -",
        "nats.durable: must be the durable consumer's name: 1 to 128 letters, digits, _ or -",
        "nats.subject: must be a subject such as agui.> (no spaces), or unset",
        "nats.batch: must be a whole number of messages from 1 to 1000",
        "nats.ackWait: must be at least 1s",
        "nats.retryDelay: 'soon' is not a duration such as 30s, 5m or 1h",
    ] == err.value.problems


def test_a_nats_section_without_a_url_is_a_problem() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"nats": {"stream": "AGUI"}}, {})

    assert ["nats.url: required to ingest from JetStream (or remove the section)"] == (
        err.value.problems
    )


def test_the_environment_overrides_the_store_url_and_the_ref_key() -> None:
    cfg = load_config(
        {"store": {"url": "sqlite:///x.db"}},
        {"SIDEWATCH_DB_URL": "postgresql+psycopg://db/sw", "SIDEWATCH_APPROVER_REF_KEY": "k" * 20},
    )

    assert ("postgresql+psycopg://db/sw", "k" * 20) == (cfg.db_url, cfg.approver_ref_key)


def test_the_request_timeout_is_a_duration_of_at_least_a_second() -> None:
    given = load_config({"server": {"requestTimeout": "2m"}}, {})

    with pytest.raises(ConfigError) as err:
        load_config({"server": {"requestTimeout": "500ms"}}, {})

    assert 120_000 == given.request_timeout_ms
    assert ["server.requestTimeout: must be at least 1s"] == err.value.problems


def test_evidence_items_can_be_marked_ignored() -> None:
    cfg = load_config({"policies": [{"name": "quiet", "evidence": {"heartbeat": "ignored"}}]}, {})

    assert (Need.IGNORED, Need.REQUIRED) == (cfg.policies[0].heartbeat, cfg.policies[0].handle)


def test_every_problem_is_reported_at_once() -> None:
    data = {
        "policies": [
            {"name": "a", "match": {"tools": "deploy"}, "routeGrace": -1, "what": 1},
            {"name": "a", "match": {"tools": ["x"]}, "evidence": {"route": "maybe", "disk": 1}},
        ],
        "privacy": {"approverRefKey": "short"},
    }

    with pytest.raises(ConfigError) as err:
        load_config(data, {}, "my.yaml")

    assert [
        "privacy.approverRefKey: must be a string of at least 16 characters",
        "policies[0] (a).what: unknown key (known: decisions, evidence, heartbeatFreshness, "
        "match, name, receipt, requireAcknowledgement, resumeGrace, routeGrace)",
        "policies[0] (a).match.tools: must be a list of glob patterns",
        "policies[0] (a).routeGrace: must not be negative",
        "policies[1].name: 'a' is used twice",
        "policies[1] (a): the last policy is the default and must have no match",
        "policies[1] (a).evidence.disk: unknown key (known: handle, heartbeat, route)",
        "policies[1] (a).evidence.route: must be required or ignored",
    ] == err.value.problems
    assert str(err.value).startswith("my.yaml: 8 problems:")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90", 90_000),
        (90, 90_000),
        ("30s", 30_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("250ms", 250),
        ("2m30s", 150_000),
    ],
    ids=[
        "bare-string-seconds",
        "number-seconds",
        "seconds",
        "minutes",
        "hours-minutes",
        "milliseconds",
        "minutes-seconds",
    ],
)
def test_durations(text: object, ms: int) -> None:
    assert ms == parse_duration(text)


@pytest.mark.parametrize("text", ["soon", "", "5 minutes", True, -3, "m"])
def test_a_bad_duration_is_refused(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_a_token_can_come_from_a_file_that_the_shell_reads(tmp_path: Path) -> None:
    secret = tmp_path / "ingest.token"
    secret.write_text("file-secret-0123456789\n")
    data = {
        "server": {
            "tokens": [
                {"name": "agents", "scopes": ["ingest"], "tokenFile": str(secret)},
                {"name": "gone", "scopes": ["read"], "tokenFile": str(tmp_path / "missing")},
            ]
        }
    }

    with pytest.raises(ConfigError) as err:
        load_config(data, {}, "c.yaml", read_token_files(data))
    ok = load_config(
        {"server": {"tokens": data["server"]["tokens"][:1]}}, {}, "c.yaml", read_token_files(data)
    )

    assert [f"server.tokens[1].tokenFile: cannot read {tmp_path / 'missing'}"] == err.value.problems
    assert ("agents", "file-secret-0123456789", frozenset({"ingest"})) == (
        ok.tokens[0].name,
        ok.tokens[0].secret,
        ok.tokens[0].scopes,
    )


def test_a_token_secret_never_shows_in_the_config_repr() -> None:
    cfg = load_config(
        {
            "server": {
                "tokens": [{"name": "t", "scopes": ["read"], "token": "very-secret-token-123"}]
            }
        },
        {},
    )

    assert "very-secret-token-123" not in repr(cfg)


def test_the_example_tokens_uncommented_narrow_each_sender_to_its_kinds() -> None:
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index("  tokens: []") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("  #  "))
    block = "server:\n  tokens:\n" + "\n".join(
        line.replace("#", " ", 1) for line in lines[start:end]
    )
    env = {
        f"SIDEWATCH_{name}_TOKEN": f"{name.lower()}-secret-0123456789"
        for name in ("AGENTS", "NOTIFIER", "APPROVALS")
    }
    files = {"/run/secrets/sidewatch-read-token": "read-secret-0123456789\n"}

    cfg = load_config(yaml.safe_load(block), env, "config.example.yaml", files)

    assert [
        ("agents", frozenset({"agui", "route", "heartbeat"})),
        ("notifier", frozenset({"route"})),
        ("approvals", frozenset({"decision"})),
        ("grafana", None),
    ] == [(t.name, t.kinds) for t in cfg.tokens]


def test_the_docs_tokens_snippet_loads_with_the_kinds_it_gives_each_sender() -> None:
    readme = (EXAMPLE.parent / "docs" / "operating" / "security.md").read_text()
    start = readme.index("Which token each sender gets")
    block = readme[readme.index("```yaml\n", start) + 8 : readme.index("```\n", start + 1)]
    env = {
        f"SIDEWATCH_{name}_TOKEN": f"{name.lower()}-secret-0123456789"
        for name in ("AGENTS", "NOTIFIER", "APPROVALS", "RUNTIME")
    }
    files = {"/run/secrets/sidewatch-read-token": "read-secret-0123456789"}

    cfg = load_config(yaml.safe_load(block), env, "security.md", files)

    assert {
        "agents": frozenset({"agui", "route", "heartbeat"}),
        "notifier": frozenset({"route"}),
        "approvals": frozenset({"decision"}),
        "runtime": frozenset({"heartbeat", "receipt", "action"}),
        "oncall": None,
    } == {t.name: t.kinds for t in cfg.tokens}


def test_a_token_without_kinds_and_the_environment_s_tokens_may_send_every_kind() -> None:
    entry = {"name": "any", "scopes": ["ingest"], "token": "any-secret-0123456789"}

    cfg = load_config(
        {"server": {"tokens": [entry]}}, {"SIDEWATCH_INGEST_TOKEN": "env-secret-0123456789"}
    )

    assert [None, None] == [t.kinds for t in cfg.tokens]


KINDS = "agui, route, decision, heartbeat, receipt, action"


@pytest.mark.parametrize(
    ("kinds", "problem"),
    [
        pytest.param(
            ["route", "decisions"],
            f"'decisions' is not a kind of line; the kinds are {KINDS}",
            id="unknown",
        ),
        pytest.param(["ROUTE"], f"'ROUTE' is not a kind of line; the kinds are {KINDS}", id="case"),
        pytest.param([], f"must be a non-empty list of the kinds {KINDS}", id="empty"),
        pytest.param("route", f"must be a non-empty list of the kinds {KINDS}", id="not-a-list"),
    ],
)
def test_a_token_s_kinds_must_be_known_kinds(kinds: object, problem: str) -> None:
    entry = {"scopes": ["ingest"], "kinds": kinds, "token": "any-secret-0123456789"}

    with pytest.raises(ConfigError) as err:
        load_config({"server": {"tokens": [entry]}}, {})

    assert [f"server.tokens[0].kinds: {problem}"] == err.value.problems


def test_kinds_on_a_token_without_the_ingest_scope_is_a_problem() -> None:
    entries = [
        {"scopes": ["read"], "kinds": ["route"], "token": "read-secret-0123456789"},
        {"scopes": ["read", "ingest"], "kinds": ["route"], "token": "both-secret-0123456789"},
    ]

    with pytest.raises(ConfigError) as err:
        load_config({"server": {"tokens": entries}}, {})

    assert [
        "server.tokens[0].kinds: narrows what an ingest token may send: this token has no "
        "ingest scope"
    ] == err.value.problems


def test_the_alertmanager_push_carries_500_alerts_at_most_as_the_example_says() -> None:
    cfg = load_config(yaml.safe_load(EXAMPLE.read_text()), {})

    assert (500, 500) == (Config().alertmanager_max_per_push, cfg.alertmanager_max_per_push)
    assert (
        20 == load_config({"alertmanager": {"maxAlertsPerPush": 20}}, {}).alertmanager_max_per_push
    )


@pytest.mark.parametrize("value", [0, -1, 2.5, "500", True, None])
def test_max_alerts_per_push_is_a_whole_number_of_at_least_one(value: object) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"alertmanager": {"maxAlertsPerPush": value}}, {})

    assert ["alertmanager.maxAlertsPerPush: must be a whole number, at least 1"] == (
        err.value.problems
    )


@pytest.mark.parametrize(
    "url",
    ["https://grafana.example/d/sidewatch?orgId=1&var-policy=default", "HTTP://10.0.0.7:3000"],
)
def test_the_alertmanager_dashboard_url_is_an_absolute_http_url_taken_as_given(url: str) -> None:
    cfg = load_config({"alertmanager": {"dashboardUrl": url}}, {})

    assert (None, url) == (Config().alertmanager_dashboard_url, cfg.alertmanager_dashboard_url)


@pytest.mark.parametrize(
    "url",
    ["/d/sidewatch", "grafana.example/d/x", "ftp://grafana.example", "https://", "https://g x", 7],
    ids=["path", "no-scheme", "ftp", "no-host", "space", "number"],
)
def test_a_dashboard_url_that_is_no_absolute_http_url_is_a_problem(url: object) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"alertmanager": {"dashboardUrl": url}}, {})

    assert [
        "alertmanager.dashboardUrl: must be an absolute http(s) URL such as "
        "https://grafana.example/d/sidewatch"
    ] == err.value.problems


def test_a_policy_maps_its_producers_labels_to_decisions() -> None:
    cfg = load_config(
        {"policies": [{"name": "crew", "decisions": {"accept": [" Go "], "decline": ["kept"]}}]},
        {},
    )

    assert {"go": Code.ACCEPT, "kept": Code.DECLINE} == cfg.decision_labels


def test_every_problem_of_a_decisions_mapping_is_reported_at_once() -> None:
    raw = {
        "policies": [
            {"name": "a", "match": {"tools": ["x"]}, "decisions": {"accept": ["go"], "maybe": []}},
            {"name": "b", "match": {"tools": ["y"]}, "decisions": {"decline": "go"}},
            {"name": "c", "decisions": {"decline": ["go", ""]}},
        ]
    }

    with pytest.raises(ConfigError) as e:
        load_config(raw, {})

    assert [
        "policies[0] (a).decisions.maybe: unknown key (known: accept, decline)",
        "policies[1] (b).decisions.decline: must be a list of non-empty labels",
        "policies[2] (c).decisions.decline: must be a list of non-empty labels",
    ] == e.value.problems


def test_a_label_mapped_both_ways_is_a_problem() -> None:
    raw = {
        "policies": [
            {"name": "a", "match": {"tools": ["x"]}, "decisions": {"accept": ["go"]}},
            {"name": "b", "decisions": {"decline": ["GO"]}},
        ]
    }

    with pytest.raises(ConfigError) as e:
        load_config(raw, {})

    assert ["policies (b, a).decisions: 'go' is both accept and decline"] == e.value.problems


@pytest.mark.parametrize(
    ("listen", "problem"),
    [
        ("127.0.0.1:99999", "port 99999 is not between 1 and 65535"),
        ("127.0.0.1:0", "port 0 is not between 1 and 65535"),
        ("999.1.1.1:9477", "999.1.1.1 is not an IP address"),
        ("[1::2::3]:9477", "[1::2::3] is not an IP address"),
        ("9477", "must be HOST:PORT, e.g. 127.0.0.1:9477"),
    ],
    ids=["port-too-big", "port-zero", "bad-ipv4", "bad-ipv6", "no-host"],
)
def test_a_listen_address_serve_could_not_bind_is_a_problem(listen: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"server": {"listen": listen}}, {})

    assert [f"server.listen: {problem}"] == err.value.problems


@pytest.mark.parametrize("listen", ["[::1]:9477", "0.0.0.0:1", "localhost:65535"])
def test_a_listen_address_serve_can_bind_is_accepted(listen: str) -> None:
    assert listen == load_config({"server": {"listen": listen}}, {}).listen


def test_a_report_schedule_that_apscheduler_refuses_is_a_problem() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"reports": {"schedule": "61 * * * *"}}, {})

    assert [
        "reports.schedule: '61 * * * *' is not a valid cron expression: Error validating "
        "expression '61': the last value (61) is higher than the maximum value (59)"
    ] == err.value.problems


def test_the_heartbeat_compaction_gap_is_never_more_than_a_policy_s_freshness() -> None:
    cfg = load_config(
        {
            "store": {"heartbeatCompaction": "5m"},
            "policies": [
                {"name": "fast", "heartbeatFreshness": "2m", "match": {"tools": ["x"]}},
                {"name": "default"},
            ],
        },
        {},
    )
    slow = load_config({"policies": [{"name": "slow", "heartbeatFreshness": "1h"}]}, {})

    assert (300_000, 120_000) == (cfg.store_heartbeat_compaction_ms, cfg.heartbeat_gap_ms)
    assert (60_000, 60_000) == (slow.store_heartbeat_compaction_ms, slow.heartbeat_gap_ms)
    assert 0 == load_config({"store": {"heartbeatCompaction": "0s"}}, {}).heartbeat_gap_ms
