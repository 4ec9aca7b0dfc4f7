"""A study on rented instances: `up --study <target> --instances K`, a managed launch whose shares are the study's.

    jobs = study_launch.jobs("//experiments/mess3:belief_study", 3, launch_id="ab12cd")   # one per instance
    runs = study_launch.ShareRuns(store_runs.StoreRuns(store), fleet.store, launch)   # what the watcher reads

Instance k runs `bazel run <target> -- --study-id <study-id> --share k/K` (the harness's `study --share`,
rl/harness/study/shares.py): the members i with i mod K = k, packed on the instance by Ray Tune (its CPUs,
and its GPUs shared out by member_devices), under a study record of the share's own. Members' records and
checkpoints go to the store as they run. A replacement for share k runs the same command line: it finds
the share's record in the store and continues it, each member that was cut off from its newest
checkpoint there. The whole study is the union of its shares: `study <module> --resume <study-id>`, on any
machine with the store, gathers them, runs what is left (members a cap stopped) and writes the summary.

The watcher (managed.py) reads a share as it reads a run: `ShareRuns` turns the share's record and its
members' manifests in the store into a `store_runs.RunInStore` of the instance now running it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from rl.devops.vast import bootstrap, redact, state
from rl.devops.vast.store_runs import RunInStore, StoreRuns, epoch
from rl.harness.run import records

# A member's statuses (rl.harness.study.record) that end it; a share whose members all ended is done, its failed
# members the study's to report.
_ENDED = frozenset({"completed", "failed"})


def jobs(
    target: str, count: int, *, launch_id: str, extra_args: tuple[str, ...] = (), now: float | None = None
) -> list[bootstrap.Job]:
    """One job per share of study `target` over `count` instances; the study id `<UTC time>-<launch id>`."""
    study_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(time.time() if now is None else now))}-{launch_id}"
    return [
        bootstrap.Job(
            target=target,
            seed=None,
            run_id=f"{study_id}-{index:03d}",
            extra_args=extra_args,
            share=bootstrap.StudyShare(study_id, index, count),
        )
        for index in range(count)
    ]


class ShareRuns:
    """What the store says of a study launch's shares, in the shape the watcher reads a run's (`StoreRuns`)."""

    def __init__(self, runs: StoreRuns, state_file: state.StateFile, launch):
        self.runs = runs
        self.state_file = state_file
        self.launch = launch
        self._shares: dict[int, dict] = {}  # share index -> its record (study.json), as last read

    def _read_shares(self, keys: set[str]) -> dict[int, tuple[str, dict]]:
        """{share index: (its folder's key, its record)} of the shares the store holds."""
        pattern = re.compile(
            rf".*/studies/{re.escape(self.launch.study_id)}\.share-(\d+)-of-{len(self.launch.shares)}/results/study\.json"
        )
        found = {}
        for key in keys:
            if (match := pattern.fullmatch(key)) and "members" in (document := self.runs.read_json(key)):
                found[int(match.group(1))] = (key[: -len("/results/study.json")], document)
        return found  # a record that cannot be read (replaced while read) counts at the next pass

    def look(self, run_ids: Iterable[str]) -> dict[str, RunInStore]:
        """{run id of an instance: its share as the store says}, only where the share's record was written since
        that instance was rented (an earlier instance's record is not this one's)."""
        rented = {
            record.run_id: record
            for record in self.state_file.read().records.values()
            if record.launch_id == self.launch.launch_id and record.run_id in set(run_ids)
        }
        with redact.guarded("read the study's shares in the store"):
            keys = set(self.runs.store.list_keys(self.runs.store.config.prefix))
            shares = self._read_shares(keys)
        self._shares = {index: document for index, (_, document) in shares.items()}
        members = self.runs.look(run for _, document in shares.values() for run in _last_runs(document))
        found = {}
        for run_id, record in rented.items():
            if record.share not in shares:
                continue
            folder, document = shares[record.share]
            seen = [members[run] for run in _last_runs(document) if run in members]
            beats = [epoch(document.get("updated_at")), *(run.heartbeat_at for run in seen)]
            heartbeat = max((beat for beat in beats if beat is not None), default=None)
            if heartbeat is None or heartbeat < (record.created_at or 0.0):
                continue
            ended = all(member["status"] in _ENDED for member in document["members"])
            index_key = f"{folder}/results/{records.REMOTE_ARTIFACTS_FILE}"
            found[run_id] = RunInStore(
                run_id=run_id,
                status="completed" if document.get("status") in _ENDED and ended else document.get("status"),
                error="",
                heartbeat_at=heartbeat,
                checkpoint_iteration=sum(run.checkpoint_iteration or 0 for run in seen) if seen else None,
                remote_complete=index_key in keys and self.runs.read_json(index_key).get("status") == "complete",
            )
        return found

    def resumable(self, run_ids: list[str]) -> str | None:
        """None: a share's command line continues its members itself (from their checkpoints in the store)."""
        del run_ids

    def continue_with(self, run_id: str) -> str:
        """How the operator continues the members of the share `run_id`'s instance ran, naming those not completed."""
        share = next((r.share for r in self.state_file.read().records.values() if r.run_id == run_id), None)
        document = self._shares.get(share, {})
        left = [
            f"{member['agent']}/seed {member['seed']}"
            for member in document.get("members", ())
            if member["status"] != "completed"
        ]
        named = f" (members not completed: {', '.join(left)})" if left else ""
        return f"`bazel run {self.launch.shares[0].target} -- --resume {self.launch.study_id}`{named}"


def _last_runs(document: dict) -> list[str]:
    """The last run of each member of a share's record that has one."""
    return [member["runs"][-1] for member in document["members"] if member["runs"]]
