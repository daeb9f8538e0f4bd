"""Exporters: thin views of the auditor's latest snapshot (Prometheus today)."""
