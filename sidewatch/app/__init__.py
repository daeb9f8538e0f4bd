"""The application layer: what sidewatch does (ingest, audit, read, report), each use case
once, with `now` passed in; the CLI, HTTP, JetStream and the scheduler all call it."""
