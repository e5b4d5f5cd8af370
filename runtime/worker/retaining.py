"""Retention in the sweep: when the org policy file's `retention` (or, without
it, `TOOLRUN_RETENTION_DAYS`) sets a period, the worker that holds the sweep
removes ended batches past it every few minutes, a bounded number of chunks at
a time, exporting their transcripts first when `export` (or
`TOOLRUN_RETENTION_EXPORT`) names a directory (docs/architecture.md,
"Retention"). The period is read when the worker starts, as its notifiers are:
a change to the policy file takes effect when the worker restarts.
The whole-file SQLite `VACUUM` is never the sweep's: it is `toolrun ledger
prune --vacuum`'s, run by a person who knows it holds the write lock."""

from __future__ import annotations

import logging
import time

from runtime.gate.policy import org_retention
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
        self.retention = org_retention(settings)  # the org file's, else the deployment's
        self._told = False  # whether this process has said which period it keeps to
        self.every, self.chunks, self.chunk = EVERY, CHUNKS, retention.CHUNK
        self._next = 0.0

    def offer(self) -> retention.Pruned | None:
        """Prune if retention is set and the last prune is `every` seconds old."""
        days = self.retention.days
        if days is None or time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + self.every
        if not self._told:
            self._tell()
        export = None
        if self.retention.export is not None:
            export = exporter(self.ledger, self.retention.export, self.key)
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

    def _tell(self) -> None:
        """Say once which period this sweep keeps to, and that the deployment's
        settings are not used when the org file's differ from them."""
        self._told, chosen, settings = True, self.retention, self.settings
        log.info(
            "retention: ended batches kept %g day(s) (from %s), %s",
            chosen.days,
            chosen.source,
            f"then exported to {chosen.export}" if chosen.export else "not exported",
        )
        if chosen.overrides(settings):
            log.warning(
                "retention: the org policy file's period wins over TOOLRUN_RETENTION_DAYS=%s "
                "and TOOLRUN_RETENTION_EXPORT=%s, which are not used",
                settings.retention_days,
                settings.retention_export,
            )
