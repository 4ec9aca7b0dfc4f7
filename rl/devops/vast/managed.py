"""Managed launches: each job's run is kept going on rented instances until it ends, within a budget.

    from rl.devops.vast import managed

    launch = managed.Launch.new(launch_id, jobs, setup, gates, image="python:3.11-bookworm", budget=20.0)
    managed.record_launch(fleet.store, launch)
    watcher = managed.Watcher(fleet, store_runs.StoreRuns(store), launch.launch_id, instance_env=env)
    watcher.tick()                  # one pass: rents what a share lacks, checks each instance, holds the cap
    watcher.watch(deadline)         # passes until every share has ended (or the deadline); `watch` command
    managed.describe(fleet.store.read(), launch_id, now)   # status lines: shares, spend, projection, cap

A *share* is one job of the launch: a target and a seed, or a study's fixed share of its members
(study_launch.py). Its runs go to the store as they
train (docs/scale_out.md), so an instance holds nothing that matters beyond the mirror interval.
A watcher (`up --wait` or `watch <launch>`, started again from the state file at any time) notices
an instance that is gone, stopped (an outbid interruptible one), never booted, or whose run went
silent; it destroys what is left of it, quarantines its machine, and rents a replacement through
the same gates, whose run resumes from the newest checkpoint of the share in the store
(`--resume-from <run-id>`). A run that fails twice with the same error ends its share `failed`.

Two watchers may run at once: a share's next instance is claimed (a `launching` record with its
label) under the state file's lock, and a watcher rents only for a share it claimed, so no share
is ever rented twice. The budget holds on what was spent plus what the live instances will cost
to their deadline: no instance is rented that would pass it, and when it is passed anyway (a
lower cap given to `watch --budget`), the least-advanced share is stopped until it holds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from rl.devops.vast import bootstrap, offers, redact, state
from rl.devops.vast.fleet import LABEL_PREFIX, RUNNING, Fleet
from rl.devops.vast.store_runs import StoreRuns

# Share statuses.
ACTIVE = "active"  # its run goes on (an instance is rented or about to be)
COMPLETED = "completed"  # its run completed; everything is in the store
FAILED = "failed"  # its run failed twice with the same error (the share's `note`)
STOPPED = "stopped"  # not continued: the budget, --max-hours, or no instance lasted (`note` says which)
# Run statuses (the harness's manifest) that end a run with an error.
_FAILED_RUN = frozenset({"failed", "crashed"})


@dataclasses.dataclass(frozen=True)
class Share:
    index: int
    target: str
    seed: int | None  # None: a share of study `Launch.study_id`'s members
    run_ids: tuple[str, ...] = ()  # one per instance rented for it, oldest first
    status: str = ACTIVE
    failures: tuple[str, ...] = ()  # the errors its runs failed with, oldest first
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Launch:
    """What a watcher needs to go on from the state file alone (no secrets)."""

    launch_id: str
    setup: dict  # bootstrap.Bootstrap's fields, its pins as [url, commit]
    gates: dict  # offers.Gates' fields
    image: str
    shares: tuple[Share, ...]
    extra_args: tuple[str, ...] = ()
    budget: float | None = None
    boot_timeout_s: float = 900.0
    start_timeout_s: float = 3 * 3600.0  # from rented to the run's first record in the store (install, build)
    silence_s: float = 900.0  # a run whose heartbeat in the store is older than this is lost
    max_instances: int = 4  # per share, replacements included
    study_id: str | None = None  # a study launch: share k runs the study's members i with i mod len(shares) = k

    @classmethod
    def new(
        cls,
        launch_id: str,
        jobs: list[bootstrap.Job],
        setup: bootstrap.Bootstrap,
        gates: offers.Gates,
        *,
        image: str,
        **options,
    ) -> Launch:
        shares = tuple(Share(index=i, target=job.target, seed=job.seed) for i, job in enumerate(jobs))
        fields = dataclasses.asdict(setup)
        return cls(
            launch_id=launch_id,
            setup=fields,
            gates={**dataclasses.asdict(gates), "excluded_machines": sorted(gates.excluded_machines)},
            image=image,
            shares=shares,
            extra_args=jobs[0].extra_args if jobs else (),
            study_id=jobs[0].share.study_id if jobs and jobs[0].share else None,
            **options,
        )

    def bootstrap(self) -> bootstrap.Bootstrap:
        fields = dict(self.setup)
        for pin in ("repo", "library"):
            if fields.get(pin):
                fields[pin] = bootstrap.GitPin(**fields[pin])
        return bootstrap.Bootstrap(**fields)

    def offer_gates(self) -> offers.Gates:
        return offers.Gates(
            **{
                **self.gates,
                "gpu_names": tuple(self.gates["gpu_names"]),
                "excluded_machines": frozenset(self.gates["excluded_machines"]),
            }
        )

    def deadline_s(self) -> float:
        """How long an instance of this launch may live (its script ends it then)."""
        return self.bootstrap().deadline_s()

    def study_share(self, index: int) -> bootstrap.StudyShare | None:
        return bootstrap.StudyShare(self.study_id, index, len(self.shares)) if self.study_id else None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, document: dict) -> Launch:
        shares = tuple(
            Share(**{**share, "run_ids": tuple(share["run_ids"]), "failures": tuple(share["failures"])})
            for share in document["shares"]
        )
        return cls(**{**document, "shares": shares, "extra_args": tuple(document["extra_args"])})


def record_launch(store: state.StateFile, launch: Launch) -> None:
    """Writes a new managed launch into the state file (its watchers read it from there)."""
    with store.update() as current:
        if launch.launch_id in current.launches:
            raise redact.DevopsError(f"launch {launch.launch_id} is already recorded; `watch {launch.launch_id}`")
        current.launches[launch.launch_id] = launch.to_json()


def launch_of(current: state.State, launch_id: str) -> Launch:
    if launch_id not in current.launches:
        known = ", ".join(sorted(current.launches)) or "none"
        raise redact.DevopsError(
            f"no managed launch {launch_id!r} in the state file (managed launches: {known});"
            " `status --all` lists every launch"
        )
    return Launch.from_json(current.launches[launch_id])


def _records(current: state.State, launch_id: str) -> list[state.Record]:
    return [record for record in current.records.values() if record.launch_id == launch_id]


def spend(current: state.State, launch_id: str, now: float) -> float:
    """Dollars spent so far by the launch's instances (price x billed hours)."""
    return sum(record.spend(now) for record in _records(current, launch_id))


def projection(current: state.State, launch: Launch, now: float) -> float:
    """Spent so far plus what every live instance will cost until its deadline."""
    ahead = sum(
        (record.dph_total or 0.0) * max(0.0, (record.created_at or now) + launch.deadline_s() - now) / 3600
        for record in _records(current, launch.launch_id)
        if record.status in state.LIVE_STATUSES
    )
    return spend(current, launch.launch_id, now) + ahead


def describe(current: state.State, launch_id: str, now: float) -> list[str]:
    """Status lines of a managed launch: each share, then spend so far, the projected total and the cap."""
    launch = launch_of(current, launch_id)
    lines = [
        f"  share {share.index} {share.target}"
        f" {f'seed {share.seed}' if share.seed is not None else f'members {share.index}/{len(launch.shares)}'}:"
        f" {share.status}, {len(share.run_ids)} instances"
        f"{f', run {share.run_ids[-1]}' if share.run_ids else ''}{f' ({share.note})' if share.note else ''}"
        for share in launch.shares
    ]
    cap = f"${launch.budget:.2f}" if launch.budget is not None else "none"
    return [
        (
            f"launch {launch_id}: spent ${spend(current, launch_id, now):.2f} so far, projected "
            f"${projection(current, launch, now):.2f} to the deadlines, cap {cap}"
        ),
        *lines,
    ]


def instance_hour_floor(gates: offers.Gates, choice: offers.Choice, budget: float | None) -> None:
    """DevopsError when `budget` cannot pay one instance-hour of the cheapest offer that passes the gates."""
    if budget is None or not choice.ranked:
        return
    cheapest = min(scored.price for scored in choice.ranked)
    if budget < cheapest:
        raise redact.BadInput(
            f"--budget ${budget:.2f} is below one instance-hour of the cheapest offer that passes"
            f" the gates (${cheapest:.3f}/h); raise the budget or relax --max-dph"
        )


class Watcher:
    """Keeps the shares of launch `launch_id` going (see the module docstring).

    `instance_env` is what each instance gets as environment (its store key, a git token): secrets,
    never written to the state file. `runs` reads the store the runs mirror to (`StoreRuns`; a study
    launch's `study_launch.ShareRuns`, which reads its shares there in the same shape).
    """

    def __init__(
        self,
        fleet: Fleet,
        runs: StoreRuns,
        launch_id: str,
        *,
        instance_env: dict[str, str],
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.fleet = fleet
        self.runs = runs
        self.launch_id = launch_id
        self.instance_env = instance_env
        self._clock = clock
        self._sleep = sleep
        self._progress = fleet.progress

    # ---- the loop -------------------------------------------------------------------------------------

    def watch(self, deadline: float) -> Launch:
        """Passes every poll interval until no share is active, or `deadline`; the launch as it ended."""
        while self.tick() and self._clock() < deadline:
            self._sleep(self.fleet.config.poll_interval_s)
        return launch_of(self.fleet.store.read(), self.launch_id)

    def tick(self) -> bool:
        """One pass over the shares; True while some share is still active."""
        current = self.fleet.store.read()
        launch = launch_of(current, self.launch_id)
        active = [share for share in launch.shares if share.status == ACTIVE]
        seen = self.runs.look([run_id for share in active for run_id in share.run_ids])
        for share in active:
            live = [
                record
                for record in _records(current, self.launch_id)
                if record.share == share.index and record.status in state.LIVE_STATUSES
            ]
            if live:
                self._check(launch, share, live[-1], seen.get(live[-1].run_id))
            else:
                self._replace(share.index)
        self._hold_budget()
        return any(share.status == ACTIVE for share in launch_of(self.fleet.store.read(), self.launch_id).shares)

    # ---- one share --------------------------------------------------------------------------------------

    def _set_share(self, index: int, **changes) -> Share:
        with self.fleet.store.update() as current:
            launch = launch_of(current, self.launch_id)
            shares = list(launch.shares)
            if "note" in changes:
                changes["note"] = redact.redact(changes["note"])
            shares[index] = dataclasses.replace(shares[index], **changes)
            current.launches[self.launch_id] = dataclasses.replace(launch, shares=tuple(shares)).to_json()
        self._progress(f"launch {self.launch_id} share {index}: " + ", ".join(f"{k}={v}" for k, v in changes.items()))
        return shares[index]

    def _check(self, launch: Launch, share: Share, record: state.Record, run) -> None:
        now = self._clock()
        if run is not None and run.status == "completed" and run.remote_complete:
            if self._end(record, "its run completed; everything is in the store"):
                self._set_share(share.index, status=COMPLETED)
            return
        # Stopped by its --max-hours (a preempted container is stopped too, earlier: that one is replaced).
        max_s = launch.bootstrap().max_hours * 3600
        if run is not None and run.status == "interrupted" and now >= (record.created_at or now) + max_s:
            if self._end(record, "its run stopped at --max-hours, checkpointed; everything is in the store"):
                self._set_share(
                    share.index,
                    status=STOPPED,
                    note=f"its run reached --max-hours; continue it with {self.runs.continue_with(record.run_id)}",
                )
            return
        if record.instance_id is None:  # claimed; its create call has not answered (here or in another watcher)
            if now - (record.claimed_at or now) > launch.boot_timeout_s:
                self.fleet.store.set(
                    record.label,
                    status=state.FAILED,
                    ended_at=now,
                    note="its create call never answered; `reap` adopts an instance with its label",
                )
            return
        row = self.fleet.account.instance(record.instance_id)
        if row is None and run is not None and run.status == "completed":
            return  # it ended itself once its run completed: the store's index is not complete yet
        if row is None:
            self._lost(record, "the instance is gone (destroyed or taken back)", destroy=False)
            return
        record = self.fleet.store.set(record.label, seen_at=now)
        status = row.get("actual_status")
        if record.status == state.BOOTING:
            if status == RUNNING:
                self.fleet.store.set(record.label, status=state.RUNNING)
            elif now - (record.created_at or now) > launch.boot_timeout_s:
                self._lost(record, f"never booted within {launch.boot_timeout_s:g} s (last status {status!r})")
            return
        if status != RUNNING:
            self._lost(record, f"the instance is {status!r} (preempted or stopped)")
            return
        if run is not None and run.status in _FAILED_RUN:
            self._failed(share, record, run.error or f"run {run.status}")
            return
        if run is None and now - (record.created_at or now) > launch.start_timeout_s:
            self._lost(record, f"its run reached no record in the store within {launch.start_timeout_s:g} s")
        elif run is not None and now - (run.heartbeat_at or now) > launch.silence_s:
            self._lost(record, f"its run has been silent for over {launch.silence_s:g} s")
        else:
            self._read_failure(share, record)

    def _read_failure(self, share: Share, record: state.Record) -> None:
        """A run that ended with an error before its manifest said so (the build, the checkout): from the log."""
        log = self.fleet.account.logs(record.instance_id, tail=self.fleet.config.log_tail)
        code = bootstrap.parse_done(log)
        if code:
            errors = [line for line in log.splitlines() if "error" in line.lower()]
            self._failed(share, record, errors[-1].strip() if errors else f"exit code {code}")

    def _end(self, record: state.Record, note: str) -> bool:
        """Destroys what is left of `record`'s instance; one that ended itself is billed until last seen.
        False when another watcher ended it first (then that one also decides what follows)."""
        if self.fleet.store.read().records[record.label].status not in state.LIVE_STATUSES:
            return False
        ended_at = self._clock()
        if record.instance_id is not None:
            try:
                self.fleet.account.destroy_instance(record.instance_id)
            except redact.DevopsError as error:
                if self.fleet.account.instance(record.instance_id) is not None:
                    self.fleet.store.set(record.label, note=f"{note}; destroy failed ({error}): run `destroy`")
                    return False
                ended_at = record.seen_at or ended_at
        self.fleet.store.set(record.label, status=state.DESTROYED, ended_at=ended_at, note=note)
        self._progress(f"{record.label}: {note}; ended")
        return True

    def _lost(self, record: state.Record, reason: str, *, destroy: bool = True) -> None:
        """The instance is lost: what its run mirrored is in the store, the rest is lost with it anyway."""
        self._progress(
            f"{record.label}: {reason}; machine {record.machine_id} quarantined for "
            f"{self.fleet.config.quarantine_hours:g} h"
        )
        with self.fleet.store.update() as current:
            current.quarantine_machine(
                record.machine_id, reason, hours=self.fleet.config.quarantine_hours, now=self._clock()
            )
        if destroy:
            self._end(record, f"lost: {reason}")
        else:
            self.fleet.store.set(
                record.label, status=state.VANISHED, ended_at=record.seen_at or self._clock(), note=f"lost: {reason}"
            )

    def _failed(self, share: Share, record: state.Record, error: str) -> None:
        if not self._end(record, f"its run failed: {error}"):
            return
        if share.failures and share.failures[-1] == redact.redact(error):
            self._set_share(share.index, status=FAILED, note=f"failed twice the same way: {error}")
        else:
            self._set_share(share.index, failures=(*share.failures, redact.redact(error)))

    # ---- renting ---------------------------------------------------------------------------------------

    def _replace(self, index: int) -> None:
        """Rents the share's next instance through the gates, within the budget; its run resumes from the store."""
        current = self.fleet.store.read()
        launch = launch_of(current, self.launch_id)
        share = launch.shares[index]
        if len(share.run_ids) >= launch.max_instances:
            self._set_share(
                index,
                status=STOPPED,
                note=f"{len(share.run_ids)} instances were rented or tried (--max-instances); not renting more",
            )
            return
        gates = launch.offer_gates()
        ours = {record.machine_id for record in current.live()}
        choice = offers.search(self.fleet.account, gates, current.quarantined(self._clock()))
        candidates = [scored for scored in choice.ranked if scored.offer.get("machine_id") not in ours]
        if not candidates:
            self._progress(
                f"launch {self.launch_id} share {index}: no offer passes the gates ({choice.summary()});"
                " trying again at the next pass"
            )
            return
        scored = candidates[0]
        now = self._clock()
        if launch.budget is not None and (
            projection(current, launch, now) + scored.price * launch.deadline_s() / 3600 > launch.budget
        ):
            self._set_share(
                index,
                status=STOPPED,
                note=f"another instance (${scored.price:.3f}/h to its deadline) "
                f"would pass the budget ${launch.budget:.2f}",
            )
            return
        resume_from = self.runs.resumable(list(share.run_ids)) if share.run_ids else None
        record = self._claim(index, scored, now)
        if record is None:
            return
        job = bootstrap.Job(
            target=share.target,
            seed=share.seed,
            run_id=record.run_id,
            extra_args=launch.extra_args,
            resume_from=resume_from,
            share=launch.study_share(index),
        )
        self._progress(
            f"{record.label}: share {index} on a new instance"
            f"{f', resuming run {resume_from} from its newest checkpoint in the store' if resume_from else ''}"
        )
        record = self.fleet.create(
            record,
            scored.offer,
            launch.image,
            gates.disk_gb,
            bootstrap.render(launch.bootstrap(), job),
            self.instance_env,
            bid=scored.price if gates.interruptible else None,
        )

    def _claim(self, index: int, scored: offers.ScoredOffer, now: float) -> state.Record | None:
        """The share's next record, `launching`, written under the lock; None when it already has a live one."""
        with self.fleet.store.update() as current:
            records = [r for r in _records(current, self.launch_id) if r.share == index]
            if any(record.status in state.LIVE_STATUSES for record in records):
                return None  # another watcher claimed it first
            launch = launch_of(current, self.launch_id)
            share = launch.shares[index]
            attempt = len(records) + 1
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
            run_id = f"{stamp}-{self.launch_id}-{index:03d}-{attempt}"
            record = state.Record(
                label=f"{LABEL_PREFIX}{self.launch_id}-{index:03d}-{attempt}",
                launch_id=self.launch_id,
                target=share.target,
                seed=share.seed,
                run_id=run_id,
                sink="store",
                dest="",
                remote_out=launch.bootstrap().out_dir(),
                offer_id=scored.offer["id"],
                machine_id=scored.offer.get("machine_id"),
                dph_total=scored.price,
                attempts=attempt,
                claimed_at=now,
            )
            current.records[record.label] = record
            shares = list(launch.shares)
            shares[index] = dataclasses.replace(share, run_ids=(*share.run_ids, run_id))
            current.launches[self.launch_id] = dataclasses.replace(launch, shares=tuple(shares)).to_json()
        return record

    # ---- the cap ---------------------------------------------------------------------------------------

    def _hold_budget(self) -> None:
        """Stops the least-advanced active shares until the projected total is within the budget (at most one
        pass per share: an instance whose destroy failed is tried again at the next pass)."""
        for _ in range(len(launch_of(self.fleet.store.read(), self.launch_id).shares)):
            current = self.fleet.store.read()
            launch = launch_of(current, self.launch_id)
            now = self._clock()
            if launch.budget is None or projection(current, launch, now) <= launch.budget:
                return
            live = {
                record.share: record
                for record in _records(current, self.launch_id)
                if record.status in state.LIVE_STATUSES
            }
            active = [share for share in launch.shares if share.status == ACTIVE and share.index in live]
            if not active:
                return
            seen = self.runs.look([share.run_ids[-1] for share in active])
            progress = {
                share.index: getattr(seen.get(share.run_ids[-1]), "checkpoint_iteration", None) or 0 for share in active
            }
            least = min(active, key=lambda share: (progress[share.index], share.index))
            if self._end(live[least.index], f"stopped: the projected total passed the budget ${launch.budget:.2f}"):
                self._set_share(
                    least.index,
                    status=STOPPED,
                    note=f"budget ${launch.budget:.2f}; resume with {self.runs.continue_with(least.run_ids[-1])}",
                )
