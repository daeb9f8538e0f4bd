"""`db upgrade` and `db stats`: the store's schema and what it holds."""

from __future__ import annotations

import click

from sidewatch.cli.options import (
    config_of,
    config_option,
    db_option,
    iso,
    one_line_errors,
    opened_store,
)


@click.group()
def db() -> None:
    """The store's schema (Alembic migrations)."""


@db.command(name="upgrade")
@config_option
@db_option
@one_line_errors
def db_upgrade(config_path: str | None, db: str | None) -> None:
    """Apply every migration the store lacks (`serve` and `ingest` also do this on start;
    `audit` and `report` never change the schema)."""
    from sidewatch.store.db import Limits, open_store, revision, upgrade

    cfg = config_of(config_path, db)
    engine = open_store(cfg.db_url, migrate=False, limits=Limits.of(cfg))
    try:
        before, _ = revision(engine)
        upgrade(engine)
        after, head = revision(engine)
    finally:
        engine.dispose()
    state = "already at" if before == after else f"upgraded from {before or 'empty'} to"
    click.echo(
        f"{engine.url.render_as_string(hide_password=True)}: {state} {after} (newest: {head})"
    )


@db.command(name="stats")
@config_option
@db_option
@one_line_errors
def db_stats(config_path: str | None, db: str | None) -> None:
    """Rows per table, the oldest row of each, and the store's size on disk: to watch it grow
    (and `store.retention` keep it in bounds). Read-only."""
    from sidewatch.store.db import revision
    from sidewatch.store.models import metadata
    from sidewatch.store.stats import store_stats

    cfg = config_of(config_path, db)
    with opened_store(cfg, read_only=True) as engine:
        current, _ = revision(engine)
        stats = store_stats(engine, [t.name for t in metadata.sorted_tables])
    click.echo(f"{engine.url.render_as_string(hide_password=True)} (schema {current})")
    width = max(len(t.name) for t in stats.tables)
    click.echo(f"{'table':<{width}}  {'rows':>12}  oldest")
    for t in stats.tables:
        oldest = "-" if t.oldest is None else iso(t.oldest)
        click.echo(f"{t.name:<{width}}  {t.rows:>12,}  {oldest}")
    size = f"size on disk: {_mb(stats.size_bytes)}"
    if stats.free_bytes is not None:
        size += f" ({_mb(stats.free_bytes)} free inside; auto_vacuum {stats.auto_vacuum})"
    click.echo(size)
    pruned = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in stats.pruned.items())
    retention = _duration(cfg.store_retention_ms)
    click.echo(f"retention {retention}; pruned so far (kept as counts): {pruned or 'nothing'}")


def _mb(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB"


def _duration(ms: int) -> str:
    days, rest = divmod(ms, 86_400_000)
    return f"{days}d" if not rest else f"{ms // 3_600_000}h" if not ms % 3_600_000 else f"{ms}ms"
