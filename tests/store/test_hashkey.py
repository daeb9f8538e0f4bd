"""The hash key of approver references is kept apart from the store it protects: a private
file beside an SQLite store (or the configured one), config or environment; the store's own
files are private; a key an earlier release kept in `meta` moves out with the same hashes."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.config_schema import load_config
from sidewatch.errors import StoreError
from sidewatch.ingest.digest import RefProtector
from sidewatch.store import hashkey
from sidewatch.store.db import open_store
from sidewatch.store.models import Meta, table_of
from sidewatch.store.repo import Store
from tests.conftest import PgSchemas

SEED = Path("/work/shared/fixtures/seed-audit.ndjson")
PERSON = "alice@example.com"
OLD_KEY = "5e" * 32  # what an earlier release generated into `meta`


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which files are created world-readable unless asked not to be."""
    before = os.umask(0o022)
    yield
    os.umask(before)


@pytest.fixture
def sqlite(tmp_path: Path, umask_022: None) -> Iterator[tuple[Engine, Path]]:
    path = tmp_path / "sidewatch.db"
    engine = open_store(f"sqlite:///{path}")
    yield engine, path
    engine.dispose()


def legacy_row(engine: Engine) -> str | None:
    meta = table_of(Meta)
    with engine.connect() as conn:
        row = conn.execute(select(meta.c.value).where(meta.c.key == "approver_ref_key")).scalar()
    return None if row is None else str(row)


def keep_key_in_meta(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(table_of(Meta).insert().values(key="approver_ref_key", value=OLD_KEY))


def test_a_new_sqlite_store_and_its_wal_and_shm_files_are_private(
    sqlite: tuple[Engine, Path],
) -> None:
    engine, path = sqlite
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body(
        "seed", SEED.read_bytes(), 1_785_083_400_000
    )
    with engine.connect():  # a connection open: the -wal and -shm files are there
        files = [path, path.with_name("sidewatch.db-wal"), path.with_name("sidewatch.db-shm")]

        modes = {f.name: oct(mode(f)) for f in files}

    assert {f.name: "0o600" for f in files} == modes


def test_the_generated_key_is_a_private_file_beside_the_store_and_never_in_it(
    sqlite: tuple[Engine, Path],
) -> None:
    engine, path = sqlite
    protect = ref_protector(engine, Config())
    hashed = protect(PERSON)
    key_file = path.with_name("sidewatch.db.key")
    key = bytes.fromhex(key_file.read_text())
    stored = b"".join(f.read_bytes() for f in path.parent.glob("sidewatch.db*") if f != key_file)

    assert "0o600" == oct(mode(key_file))
    assert RefProtector(key, Config().role_prefixes)(PERSON) == hashed
    assert key.hex().encode() not in stored and key not in stored
    assert legacy_row(engine) is None
    assert hashed == ref_protector(engine, Config())(PERSON)  # the same key on every start


def test_a_key_an_earlier_release_kept_in_an_sqlite_store_moves_beside_it_with_its_hashes(
    sqlite: tuple[Engine, Path],
) -> None:
    engine, path = sqlite
    keep_key_in_meta(engine)
    before = RefProtector(bytes.fromhex(OLD_KEY), Config().role_prefixes)(PERSON)

    after = ref_protector(engine, Config())(PERSON)

    assert before == after
    assert OLD_KEY == path.with_name("sidewatch.db.key").read_text().strip()
    assert legacy_row(engine) is None
    stored = b"".join(
        f.read_bytes() for f in path.parent.glob("sidewatch.db*") if f.suffix != ".key"
    )
    assert OLD_KEY.encode() not in stored  # erased, not just unlinked from its page


def test_a_key_an_earlier_release_kept_in_any_store_moves_to_the_configured_file(
    db_url: str, tmp_path: Path, umask_022: None
) -> None:
    engine = open_store(db_url)
    keep_key_in_meta(engine)
    key_file = tmp_path / "secrets" / "hash.key"
    key_file.parent.mkdir()
    config = load_config({"privacy": {"hashKeyFile": str(key_file)}}, {})

    hashed = ref_protector(engine, config)(PERSON)
    left = legacy_row(engine)
    engine.dispose()

    assert RefProtector(bytes.fromhex(OLD_KEY), config.role_prefixes)(PERSON) == hashed
    assert (OLD_KEY, "0o600") == (key_file.read_text().strip(), oct(mode(key_file)))
    assert left is None


def test_a_key_from_the_environment_is_used_and_none_is_generated(
    sqlite: tuple[Engine, Path],
) -> None:
    engine, path = sqlite
    keep_key_in_meta(engine)
    secret = "an-operator-chosen-key-0123456789"
    config = load_config({}, {"SIDEWATCH_APPROVER_REF_KEY": secret})

    hashed = ref_protector(engine, config)(PERSON)

    assert RefProtector(secret.encode(), config.role_prefixes)(PERSON) == hashed
    assert not path.with_name("sidewatch.db.key").exists()
    assert legacy_row(engine) is None  # the earlier release's key, unused now, is gone


def test_a_postgresql_store_without_a_key_file_keeps_its_key_and_says_so(
    pg_schemas: PgSchemas, caplog: pytest.LogCaptureFixture
) -> None:
    schema = pg_schemas.lend()
    engine = open_store(pg_schemas.url(schema))

    with caplog.at_level(logging.WARNING, logger="sidewatch.store"):
        first = ref_protector(engine, Config())(PERSON)
    second = ref_protector(engine, Config())(PERSON)
    engine.dispose()
    pg_schemas.give_back(schema)

    assert first == second
    assert "privacy.hashKeyFile" in caplog.text


@pytest.mark.parametrize("content", ["", "not hex at all", "abcd"])
def test_a_key_file_without_a_usable_key_is_a_store_error(
    sqlite: tuple[Engine, Path], tmp_path: Path, content: str
) -> None:
    engine, _ = sqlite
    key_file = tmp_path / "bad.key"
    key_file.write_text(content)

    with pytest.raises(StoreError, match="at least 32 hex digits"):
        ref_protector(engine, load_config({"privacy": {"hashKeyFile": str(key_file)}}, {}))


def test_two_postgresql_replicas_generating_a_key_at_once_agree_on_the_first(
    pg_schemas: PgSchemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pg_schemas.lend()
    engine = open_store(pg_schemas.url(schema))
    real = hashkey.secrets.token_bytes

    def racing(n: int) -> bytes:  # the other replica inserts its key as this one draws
        monkeypatch.setattr(hashkey.secrets, "token_bytes", real)
        keep_key_in_meta(engine)
        return real(n)

    monkeypatch.setattr(hashkey.secrets, "token_bytes", racing)
    hashed = ref_protector(engine, Config())(PERSON)
    engine.dispose()
    pg_schemas.give_back(schema)

    assert RefProtector(bytes.fromhex(OLD_KEY), Config().role_prefixes)(PERSON) == hashed
