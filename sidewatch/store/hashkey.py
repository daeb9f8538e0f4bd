"""Where the store's hash key lives: in a `0600` file beside an SQLite store (or where
`privacy.hashKeyFile` says), never in the store it protects. A key an earlier release kept in
the `meta` table is moved to that file on first use, so that the same references keep the
same hashes, and is then erased from the store."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError

from sidewatch.errors import StoreError
from sidewatch.store.models import Meta, table_of
from sidewatch.store.sqlite_file import sqlite_file

log = logging.getLogger("sidewatch.store")
LEGACY_KEY = "approver_ref_key"  # the `meta` row of the releases that kept it in the store
KEY_BYTES = 32


def key_file_of(engine: Engine, configured: str | None) -> Path | None:
    """The key file: the configured one, else `<database>.key` beside an SQLite file; None
    for PostgreSQL without one (replicas share no directory) and for an in-memory SQLite."""
    if configured:
        return Path(configured)
    database = sqlite_file(engine)
    return database.with_name(database.name + ".key") if database else None


def hash_key(engine: Engine, configured_file: str | None) -> bytes:
    """The key of approver-reference hashes and keyed digests, created on first use."""
    path = key_file_of(engine, configured_file)
    meta = table_of(Meta)
    with engine.begin() as conn:
        row = conn.execute(select(meta.c.value).where(meta.c.key == LEGACY_KEY)).scalar()
    legacy = bytes.fromhex(str(row)) if row is not None else None
    if path is None:
        if legacy is None:  # a PostgreSQL store: docs/internals/interpretations/ingest.md
            legacy = secrets.token_bytes(KEY_BYTES)
            try:
                with engine.begin() as conn:
                    conn.execute(meta.insert().values(key=LEGACY_KEY, value=legacy.hex()))
            except IntegrityError:  # a replica starting at the same moment was first
                return hash_key(engine, configured_file)
        log.warning(
            "the hash key is kept in the store itself: set privacy.hashKeyFile or "
            "SIDEWATCH_APPROVER_REF_KEY to keep it apart (the key is moved there)"
        )
        return legacy
    key = _read(path)
    if key is None:
        key = _create(path, legacy or secrets.token_bytes(KEY_BYTES))
    if legacy is not None:
        erase_legacy_key(engine)
    return key


def erase_legacy_key(engine: Engine) -> None:
    """Delete an earlier release's key from `meta`, leaving no copy of it in the file: SQLite
    zeroes the deleted row (`secure_delete`), then empties its write-ahead log."""
    meta = table_of(Meta)
    with engine.begin() as conn:
        if conn.execute(select(meta.c.key).where(meta.c.key == LEGACY_KEY)).first() is None:
            return
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA secure_delete=ON")
        conn.execute(delete(meta).where(meta.c.key == LEGACY_KEY))
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA secure_delete=OFF")  # the pooled connection as it was
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def _read(path: Path) -> bytes | None:
    try:
        text = path.read_text(encoding="ascii").strip()
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"hash key file {path} cannot be read: {e}") from e
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise StoreError(
            f"hash key file {path} must hold at least 32 hex digits (openssl rand -hex 32)"
        )
    if mode & 0o077:
        log.warning("hash key file %s is readable by others than its owner: chmod 600 it", path)
    return key


def _create(path: Path, key: bytes) -> bytes:
    """Write `key` to `path` (mode 0600) unless another process just did: the file appears
    whole or not at all (written aside, then linked into place), and the first one wins."""
    # Random, not the pid alone: replicas in containers are each pid 1, and threads share one.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, key.hex().encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            with contextlib.suppress(FileExistsError):  # another process was first: its key
                os.link(tmp, path)
        finally:
            tmp.unlink()
    except OSError as e:
        raise StoreError(f"hash key file {path} cannot be written: {e}") from e
    found = _read(path)
    if found is None:  # removed between the link and the read
        raise StoreError(f"hash key file {path} vanished as it was created")
    return found
