"""A running run's manifest: replaced field by field, rewritten atomically, and kept fresh by a heartbeat.

keeper = RecordKeeper(results_dir, manifest, seeds=seeds, lock=lock)   # a RunManifest, the run's lock
keeper.set(status="running"); keeper.write()                         # run_manifest.json, atomically
keeper.start_heartbeat(interval_s=30.0, also=stream.write_summary)   # a thread: the beat, then `also`
keeper.stop_heartbeat()
"""

from __future__ import annotations

import dataclasses
import pathlib
import threading
from collections.abc import Callable
from typing import Any

from absl import logging

from rl.harness.run import records, seeding
from rl.harness.run.manifest import RunManifest
from rl.harness.run.status import utc_now


class RecordKeeper:
    """Holds the frozen `RunManifest` of a running run and writes it; every change holds the run's lock."""

    def __init__(
        self, results_dir: pathlib.Path, manifest: RunManifest, *, seeds: seeding.SeedStreams, lock: threading.RLock
    ):
        self._results_dir = results_dir
        self._manifest = manifest
        self._seeds = seeds
        self._lock = lock
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None

    @property
    def manifest(self) -> RunManifest:
        with self._lock:
            return self._manifest

    def set(self, **fields: Any) -> None:
        """Replaces manifest fields in memory (`write` records them)."""
        with self._lock:
            self._manifest = dataclasses.replace(self._manifest, **fields)

    def write(self) -> None:
        """Rewrites run_manifest.json atomically, with the seed streams issued so far."""
        with self._lock:
            self._manifest = dataclasses.replace(self._manifest, seed_streams=self._seeds.issued())
            records.write_json_atomically(str(self._results_dir / records.MANIFEST_FILE), self._manifest.to_dict())

    def start_heartbeat(self, interval_s: float, *, also: Callable[[], None]) -> None:
        """Every `interval_s`: `also` (the summary), then the manifest with a fresh heartbeat, on a thread."""
        self._heartbeat_thread = threading.Thread(
            target=self._beat, args=(interval_s, also), name="rl-harness-heartbeat", daemon=True
        )
        self._heartbeat_thread.start()

    def stop_heartbeat(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join()

    def _beat(self, interval_s: float, also: Callable[[], None]) -> None:
        while not self._heartbeat_stop.wait(interval_s):
            try:
                with self._lock:
                    if self._heartbeat_stop.is_set():
                        return
                    self.set(heartbeat=dataclasses.replace(self._manifest.heartbeat, at=utc_now()))
                    also()
                    self.write()
            except OSError as error:  # a full disk must not kill the run; the next beat retries
                logging.warning("heartbeat write failed: %s", error)
