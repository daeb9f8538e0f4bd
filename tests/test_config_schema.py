"""config.yaml's JSON Schema (`check-config --schema`): it accepts the example file and flags
what the loader refuses, as an editor would show it; each default is the record's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sidewatch.config import Config, parse_duration
from sidewatch.config_schema import json_schema, load_config, parse
from sidewatch.config_values import spelled
from sidewatch.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "config.example.yaml"


def errors(data: Any) -> list[str]:
    validator = Draft202012Validator(json_schema())
    return sorted(e.json_path for e in validator.iter_errors(data))


def test_the_schema_is_a_draft_2020_12_schema() -> None:
    schema = json_schema()

    Draft202012Validator.check_schema(schema)
    assert "https://json-schema.org/draft/2020-12/schema" == schema["$schema"]


def test_the_example_config_is_valid_by_the_schema() -> None:
    assert [] == errors(yaml.safe_load(EXAMPLE.read_text()))


def test_the_example_nats_section_uncommented_is_valid_by_the_schema() -> None:
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index("# nats:")
    block = "\n".join(line.removeprefix("# ") for line in lines[start : lines.index("", start)])

    assert [] == errors(yaml.safe_load(block))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("store: {busyTimout: 10s}", "$.store"),
        ("sever: {listen: '127.0.0.1:9477'}", "$"),
        ("policies: [{name: a, match: {tool: [x]}}]", "$.policies[0].match"),
        ("server: {tokens: [{name: a, scopes: [ingest], tokenEnvv: X}]}", "$.server.tokens[0]"),
    ],
    ids=["section-key", "top-level-key", "policy-key", "token-key"],
)
def test_a_mistyped_key_is_flagged_by_the_schema_as_by_the_loader(text: str, where: str) -> None:
    data = yaml.safe_load(text)

    with pytest.raises(Exception, match="unknown key"):
        load_config(data, {})
    assert [where] == errors(data)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("store: {poolSize: many}", "$.store.poolSize"),
        ("auditor: {interval: soon}", "$.auditor.interval"),
        ("policies: [{name: a, receipt: maybe}]", "$.policies[0].receipt"),
        ("nats: {url: 'nats://h:4222'}", "$.nats"),  # stream is required
        ("privacy: {actionDigest: hmac}", "$.privacy.actionDigest"),
        ("alertmanager: {dashboardUrl: grafana.example/d/x}", "$.alertmanager.dashboardUrl"),
        (
            "server: {tokens: [{scopes: [ingest], kinds: [decisions], token: 0123456789abcdef}]}",
            "$.server.tokens[0].kinds",
        ),
    ],
    ids=["whole-number", "duration", "choice", "required", "enum", "absolute-url", "token-kind"],
)
def test_a_wrong_value_is_flagged_by_the_schema_as_by_the_loader(text: str, where: str) -> None:
    data = yaml.safe_load(text)

    with pytest.raises(Exception, match="problem"):
        load_config(data, {})
    assert [where] == errors(data)


def test_the_schema_gives_the_records_defaults_as_the_file_spells_them() -> None:
    schema = json_schema()
    store = schema["$defs"]["Store"]["properties"]

    assert ("5s", 10, "30d", "sqlite:///./sidewatch.db") == (
        store["connectTimeout"]["default"],
        store["poolSize"]["default"],
        store["retention"]["default"],
        store["url"]["default"],
    )


def test_store_retention_is_a_duration_of_30_days_by_default() -> None:
    assert (30 * 86_400_000, 7 * 86_400_000) == (
        Config().store_retention_ms,
        load_config({"store": {"retention": "7d"}}, {}).store_retention_ms,
    )


@given(st.integers(min_value=0, max_value=400 * 86_400_000))
def test_a_spelled_duration_parses_back_to_itself(ms: int) -> None:
    assert ms == parse_duration(spelled(ms))


def test_waits_frontend_tools_are_glob_patterns_none_by_default() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"waits": {"frontendTools": ["ok_*", ""]}}, {})

    assert ((), ("confirm_*",)) == (
        Config().frontend_tools,
        load_config({"waits": {"frontendTools": ["confirm_*"]}}, {}).frontend_tools,
    )
    assert ["waits.frontendTools: must be a list of glob patterns"] == err.value.problems


def test_no_file_and_no_environment_is_what_the_models_make_of_nothing() -> None:
    """`load_config` skips pydantic when there is nothing to parse: its Config() must be what
    parsing nothing gives."""
    assert parse(None, {}, "config", {}) == load_config(None, {})
    assert parse({}, {}, "config", {}) == load_config(None, {})


@pytest.mark.parametrize("pattern", ["confirm_[", "approve_[!", "a[]"])
def test_a_frontend_tool_pattern_whose_bracket_never_closes_is_refused(pattern: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"waits": {"frontendTools": ["confirm_*", pattern]}}, {})

    assert [
        f"waits.frontendTools: {pattern!r} is not a glob pattern: a '[' in it is never closed"
    ] == err.value.problems


def test_frontend_tool_patterns_with_closed_sets_are_taken() -> None:
    patterns = ["confirm_*", "approve_[ab]", "deny_[!x]?", "ok_[]]"]

    assert tuple(patterns) == load_config({"waits": {"frontendTools": patterns}}, {}).frontend_tools


def _keys(schema: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of the file, through mappings and lists of them (by its JSON Schema)."""
    out = []
    for key, prop in schema.get("properties", {}).items():
        out.append((*path, key))
        refs = [prop, prop.get("items", {}), *prop.get("anyOf", [])]
        for ref in (r["$ref"] for r in refs if "$ref" in r):
            out += _keys(json_schema()["$defs"][ref.rsplit("/", 1)[1]], (*path, key))
    return out


@pytest.mark.parametrize("key", _keys(json_schema()), ids=".".join)
def test_every_key_says_a_wrong_value_s_problem_in_sidewatch_s_words(key: tuple[str, ...]) -> None:
    data: Any = {"wrong": [1.5]}
    for part in reversed(key):
        data = {part: data}
        if part in ("policies", "tokens"):
            data = {part: [data[part]] if isinstance(data[part], dict) else data[part]}

    with pytest.raises(ConfigError) as err:
        load_config(data, {})

    assert [] == [p for p in err.value.problems if "Input should" in p or "Value error" in p]
