"""store/sql.py builds every INSERT of the store's own statements, in the driver's style."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import create_engine

from sidewatch.store.sql import insert_sql

STORE = Path(__file__).resolve().parents[2] / "sidewatch" / "store"


def test_an_insert_is_built_in_the_drivers_parameter_style_with_its_tail() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        sql = insert_sql(conn, "finding", ("rule", "at"), "ON CONFLICT DO NOTHING")
    engine.dispose()

    assert "INSERT INTO finding (rule, at) VALUES (?, ?) ON CONFLICT DO NOTHING" == sql


def test_no_other_module_of_the_store_builds_an_insert_of_its_own() -> None:
    builders = [
        p.name
        for p in STORE.glob("*.py")
        if p.name != "sql.py" and re.search(r"INSERT INTO \{", p.read_text())
    ]

    assert [] == builders
