"""A producer's wait is stored by its ids, never with what the capture carries that is
content (messages, arguments, step outputs, answer labels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ingest.producers.captures import audited, capture

# What the captures carry that is content: messages, arguments, step outputs, answer labels.
CONTENT = {
    "crewai-own-label-refused": [b"Purge the cache?", b"purge the cache", b"purge_refused"],
    "maf-approve-edited-args": [b"/tmp/demo.txt", b"/tmp/other.txt", b"Please delete"],
    "maf-workflow-request-info": [b"Purge the cache?", b"Really not?"],
}


@pytest.mark.parametrize(("name", "secrets"), CONTENT.items(), ids=list(CONTENT))
def test_a_producer_wait_is_stored_by_its_ids_without_its_content(
    tmp_path: Path, name: str, secrets: list[bytes]
) -> None:
    db = tmp_path / "sidewatch.db"
    (wait, *_) = audited(f"sqlite:///{db}", name)

    assert wait.evidence.interrupt_id in capture(name).decode()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert [] == [s for s in secrets if s in stored]
