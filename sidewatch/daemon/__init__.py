"""The service layer: the pipelines that join ingest, store and the health model (used by the
CLI today, and by `sidewatch serve`'s HTTP ingest and scheduled auditor)."""
