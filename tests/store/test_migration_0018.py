"""Migration 0018 on SQLite and PostgreSQL: a store of the 0017 schema with findings, lines,
rejects and pruned rows upgrades with its totals (`running_total`) equal to what the rows and
pruned_total counted, so the exported counters do not move; the downgrade drops the table
and leaves every other row."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect

from sidewatch.app.audit import Auditor
from sidewatch.app.prune import Retention
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_prune import MIN, NOW, POLICIES, T0, WEEK, history, ingest
from tests.store.test_migration_0013 import _counts, _to
from tests.store.test_running_totals import counted, crewai, findings_of, told, unknown_answer


def test_a_0017_store_upgrades_with_its_totals_filled_from_its_rows(blank_db_url: str) -> None:
    store = Store(open_store(blank_db_url))
    auditor = Auditor(store, POLICIES)
    crewai(store, "t-crew", T0)
    ingest(store, [unknown_answer("t-mixed", T0 + 2 * MIN)], T0 + 2 * MIN)
    history(store, auditor)
    auditor.tick(NOW)
    Retention(store.engine, WEEK).prune(NOW, budget_s=60)
    truth = counted(store.engine)
    before = auditor.snapshot.findings
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0017")
    assert "running_total" not in inspect(engine).get_table_names()
    kept = _counts(engine)

    store = Store(open_store(blank_db_url))  # upgraded to the head
    upgraded = Auditor(store, POLICIES)

    assert kept == _counts(store.engine)
    assert truth == counted(store.engine) == told(upgraded)
    assert findings_of(truth)["cancel_runs_first_outcome"] == 1  # pruned, still counted
    assert before == upgraded.snapshot.findings
    crewai(store, "t-crew-2", NOW)  # written after the upgrade: added to the filled totals
    assert counted(store.engine) == told(upgraded)
    store.engine.dispose()

    _to(engine, "0017")
    assert "running_total" not in inspect(engine).get_table_names()
    engine.dispose()
