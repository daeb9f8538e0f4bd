"""bindrun: a thread's service bindings are found by (thread, run), so a long thread's
checkpoint loads the beats of the services bound to its suffix's runs only, not along every
binding the thread's history holds

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 01:50:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_service_binding_thread_run", "service_binding", ["thread_id", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_service_binding_thread_run", table_name="service_binding")
