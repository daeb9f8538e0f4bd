"""The store: SQLModel tables on SQLite (default) or PostgreSQL, Alembic migrations, and the
edge where stored rows become core facts."""
