"""The store: SQLAlchemy Core tables on SQLite (default) or PostgreSQL, Alembic migrations, and the
edge where stored rows become core facts."""
