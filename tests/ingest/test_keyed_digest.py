"""`privacy.actionDigest: keyed`: every digest is stored as an HMAC with the hash key, on
SQLite and PostgreSQL. A keyed digest cannot confirm a guess of the arguments without the key,
is stable, and changes exactly when the plain one would: every verdict stays the same."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import text

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.config_schema import load_config
from sidewatch.core.model import State
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.errors import ConfigError
from sidewatch.ingest.digest import RefProtector
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.test_pipeline import BASE, MIN, asked, digest_of, evidence, routed

KEY = "a-configured-hash-key-0123456789"
PLAIN = digest_of("deploy", {"target": "prod"})  # the digest of asked()'s gated call
PRODUCERS = Path(__file__).resolve().parent / "producers" / "fixtures"
SEED = Path("/work/shared/fixtures/seed-audit.ndjson")


def protector(mode: str) -> RefProtector:
    return ref_protector_of(load_config({"privacy": {"actionDigest": mode}}, {}))


def ref_protector_of(config: Any) -> RefProtector:
    return RefProtector(KEY.encode(), config.role_prefixes, config.keyed_digests)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    engine = open_store(db_url)
    yield Store(engine)
    engine.dispose()


def ingest(store: Store, protect: RefProtector, *lines: dict[str, Any], at: int = BASE) -> None:
    body = b"\n".join(orjson.dumps(line) for line in lines)
    Ingest(store, protect, Config()).body("test", body, at)


def stored_text(store: Store) -> str:
    """Every digest column and natural key of the store, as one text."""
    queries = [
        "SELECT digest FROM interrupt",
        "SELECT digest FROM tool_call",
        "SELECT digest, key FROM signal",
    ]
    with store.engine.connect() as conn:
        return " ".join(str(v) for q in queries for row in conn.execute(text(q)) for v in row)


def test_a_keyed_digest_is_an_hmac_of_the_digest_stable_and_unlike_the_plain_one() -> None:
    keyed = protector("keyed")

    first, again = keyed.digest(PLAIN), protector("keyed").digest(PLAIN)
    other_key = RefProtector(b"another-key-0123456789", (), True).digest(PLAIN)

    assert first.startswith("hmac-sha256:") and len(first) == len("hmac-sha256:") + 64
    assert first == again
    assert len({PLAIN, first, other_key}) == 3
    assert PLAIN.removeprefix("sha256:") not in first


def test_keyed_digests_are_stored_and_shown_and_the_plain_one_is_nowhere(store: Store) -> None:
    keyed = protector("keyed")
    ingest(store, keyed, *asked(), routed(BASE + MIN))
    seen = {"threadId": "t1", "interruptId": "i1", "decision": "accept", "actionDigest": PLAIN}
    ingest(store, keyed, evidence("decision", seen, BASE + 2 * MIN))

    (a,) = audit(store, (DEFAULT_POLICY,), BASE + 3 * MIN)

    assert keyed.digest(PLAIN) == a.verdict.facts.action_digest
    assert not a.verdict.facts.digest_changed  # the person approved the digest they saw
    assert PLAIN.removeprefix("sha256:") not in stored_text(store)
    assert "hmac-sha256:" in stored_text(store)


def test_a_changed_action_is_stale_with_keyed_digests(store: Store) -> None:
    keyed = protector("keyed")
    changed = digest_of("deploy", {"target": "staging"})
    ingest(store, keyed, *asked(), routed(BASE + MIN))
    ingest(
        store,
        keyed,
        evidence(
            "action",
            {"threadId": "t1", "interruptId": "i1", "actionDigest": changed},
            BASE + 2 * MIN,
        ),
    )

    (a,) = audit(store, (DEFAULT_POLICY,), BASE + 3 * MIN)

    assert (State.STALE, True) == (a.verdict.state, a.verdict.facts.digest_changed)
    assert keyed.digest(changed) == a.verdict.facts.action_digest


def test_an_evidence_event_delivered_again_is_stored_once_under_a_keyed_natural_key(
    store: Store, tmp_path: Path
) -> None:
    digest = {"threadId": "t1", "interruptId": "i1", "actionDigest": PLAIN}
    action = evidence("action", digest, BASE)
    ingest(store, protector("keyed"), *asked(), action)
    ingest(store, protector("keyed"), action, at=BASE + MIN)
    plain_engine = open_store(f"sqlite:///{tmp_path / 'plain.db'}")
    ingest(Store(plain_engine), protector("plain"), *asked(), action)

    query = text("SELECT key FROM signal WHERE kind = 'action'")
    with store.engine.connect() as conn:
        keys = conn.execute(query).scalars().all()
    with plain_engine.connect() as conn:
        plain_key = conn.execute(query).scalar_one()
    plain_engine.dispose()

    assert 1 == len(keys)
    assert plain_key != keys[0]  # the plain natural key would confirm a guess as well


FRONTEND_TOOLS = ("confirm_*", "delete_file", "send_email", "deleteFile")


@pytest.mark.parametrize(
    "fixture",
    [SEED, *sorted(PRODUCERS.glob("*.ndjson"))],
    ids=lambda p: p.stem,
)
def test_keyed_digests_give_every_verdict_the_plain_ones_give(
    tmp_path: Path, fixture: Path
) -> None:
    """The same stream into two stores, one with plain digests and one with keyed ones."""
    found = {}
    body = fixture.read_bytes()
    # ingested after the last time a producer stamped on it (pydantic-ai stamps its events)
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, 1_785_083_339_000]) + 1_000
    for mode in ("plain", "keyed"):
        engine = open_store(f"sqlite:///{tmp_path / mode}.db")
        store = Store(engine)
        # frontend tools on: the frontend-tool captures hold their waits only then (and agno's
        # pauses, and Mastra's requireApproval call)
        Ingest(store, protector(mode), Config(frontend_tools=FRONTEND_TOOLS)).body(
            fixture.name, body, received
        )
        found[mode] = {
            a.verdict.request_id: (a.verdict.state, a.verdict.phase, a.verdict.facts.digest_changed)
            for a in audit(store, (DEFAULT_POLICY,), received + 60_000)
        }
        engine.dispose()

    assert found["plain"] == found["keyed"]
    assert found["plain"]


def test_the_config_refuses_an_unknown_digest_mode() -> None:
    with pytest.raises(ConfigError, match=r"privacy\.actionDigest: must be plain or keyed"):
        load_config({"privacy": {"actionDigest": "hmac"}}, {})


def test_the_daemon_keys_digests_with_the_stores_hash_key(db_url: str, tmp_path: Path) -> None:
    config = load_config(
        {"privacy": {"actionDigest": "keyed", "hashKeyFile": str(tmp_path / "k")}}, {}
    )
    engine = open_store(db_url)
    protect = ref_protector(engine, config)
    key = bytes.fromhex((tmp_path / "k").read_text())
    engine.dispose()

    assert RefProtector(key, (), True).digest(PLAIN) == protect.digest(PLAIN)
    assert protect.keyed_digests
