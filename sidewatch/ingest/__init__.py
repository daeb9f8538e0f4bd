"""Ingest: AG-UI traffic and sidewatch evidence events in, content-free facts out."""
