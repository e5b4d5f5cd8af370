"""Retention in the sweep: when `TOOLRUN_RETENTION_DAYS` is set, the worker
that holds the sweep removes ended batches past the period every few minutes,
a bounded number of chunks at a time, exporting their transcripts first when
`TOOLRUN_RETENTION_EXPORT` names a directory (docs/architecture.md, "Retention").
The whole-file SQLite `VACUUM` is never the sweep's: it is `toolrun ledger
prune --vacuum`'s, run by a person who knows it holds the write lock."""

from __future__ import annotations

import logging
import time

from runtime.ledger import retention
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.transcript.archive import exporter

log = logging.getLogger("toolrun.worker")
EVERY = 300.0  # seconds between two prunes of one sweeping worker
CHUNKS = 25  # chunks (of `retention.CHUNK` batches) at most per prune: the sweep stays short


class Retaining:
    def __init__(self, settings: Settings, ledger: Ledger, key: bytes) -> None:
        self.settings, self.ledger, self.key = settings, ledger, key
        self.every, self.chunks, self.chunk = EVERY, CHUNKS, retention.CHUNK
        self._next = 0.0

    def offer(self) -> retention.Pruned | None:
        """Prune if retention is set and the last prune is `every` seconds old."""
        days = self.settings.retention_days
        if days is None or time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + self.every
        export = None
        if self.settings.retention_export is not None:
            export = exporter(self.ledger, self.settings.retention_export, self.key)
        pruned = retention.prune(
            self.ledger,
            retention.cutoff(days),
            export=export,
            chunk=self.chunk,
            max_chunks=self.chunks,
        )
        if pruned.batches or pruned.failed_exports:
            log.info(
                "retention: removed %d batch(es), %d kept (export failed); %s; %.2f s",
                pruned.batches,
                pruned.failed_exports,
                pruned.reclaimed,
                pruned.seconds,
            )
        return pruned
