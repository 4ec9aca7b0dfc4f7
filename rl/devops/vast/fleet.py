"""Launch, watch, secure and destroy instances: what the CLI's commands do.

    from rl.devops.vast import bootstrap, durability, fleet, offers, state

    fl = fleet.Fleet(account, state.StateFile(state_dir), fleet.Progress(sys.stderr))   # sinks: build_sink
    launch_id = fleet.new_launch_id()
    jobs = fleet.make_jobs(["//experiments/mess3:reward_only"], seeds=range(4), launch_id=launch_id)
    plan = fl.plan(offers.Gates(max_dph=0.8), jobs, launch_id=launch_id, hours=3.0)
    print(plan.describe())                       # "4 instances at $1.640/h together; 3 h expected: about $4.92 ..."
    spec = durability.SinkSpec(kind="copy", dest="vast_results", remote_out=setup.out_dir())
    records = fl.launch(plan, setup, spec, image="python:3.11-bookworm")
    fl.status()                                  # one line per instance, spend so far
    fl.collect([r.label for r in records], deadline=time.time() + 6 * 3600)   # secure, then destroy
    fl.reap(destroy=False)                       # our labelled instances the state file does not track

One instance runs one job (a target and a seed). Labels are
`rlh-<launch id>-<job>-<attempt>`, so every instance this tool ever made is
recognisable in the account. A job whose instance never boots is retried on
the next-best offer (up to `max_attempts`), and the machine is quarantined.
`destroy` passes the durability gate first (durability.py): a run that has
not printed RLH_DONE, or whose results fail verification, keeps its instance,
and the record says why.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TextIO

from rl.devops.vast import bootstrap, durability, offers, redact, state
from rl.devops.vast.api import CreateOutcomeUnknown, VastAccount

LABEL_PREFIX = "rlh-"
RUNNING = "running"  # vast.ai's actual_status of a booted instance
# vast.ai's actual_status values of an instance whose container has not started yet (None: not reported).
# Any other status ("exited", "offline", ...) may follow a run, so it never lets a destroy skip the gate.
NOT_STARTED = frozenset({None, "scheduling", "created", "loading"})
# A launch's credentials outlive its longest run by this much: boot retries, the upload after a timeout.
LAUNCH_CREDENTIALS_MARGIN_S = 24 * 3600


def new_launch_id() -> str:
    """Six random hex digits naming one `up`."""
    return secrets.token_hex(3)


def make_jobs(
    targets: Iterable[str],
    seeds: Iterable[int],
    *,
    launch_id: str,
    extra_args: tuple[str, ...] = (),
    now: float | None = None,
) -> list[bootstrap.Job]:
    """One job per (target, seed), run ids `<UTC time>-<launch id>-<job>` (sortable, unique per launch)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    pairs = [(target, seed) for target in targets for seed in seeds]
    if not pairs:
        raise redact.DevopsError("nothing to launch: give at least one --target and one seed")
    return [
        bootstrap.Job(target=target, seed=seed, run_id=f"{stamp}-{launch_id}-{index:03d}", extra_args=extra_args)
        for index, (target, seed) in enumerate(pairs)
    ]


class Progress:
    """Timestamped, redacted progress lines on `stream` (stderr for the CLI); safe from many threads."""

    def __init__(self, stream: TextIO = sys.stderr, clock: Callable[[], float] = time.time):
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        line = f"[{time.strftime('%H:%M:%S', time.localtime(self._clock()))}] {redact.redact(message)}\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()


@dataclasses.dataclass(frozen=True)
class Plan:
    launch_id: str
    jobs: list[bootstrap.Job]
    choice: offers.Choice
    hours: float
    disk_gb: float
    interruptible: bool = False  # bid on the offers (Gates.interruptible)

    def rate(self) -> float:
        """$/h of the offers the jobs would rent first, together."""
        return sum(scored.price for scored in self.choice.ranked[: len(self.jobs)])

    def estimate(self) -> float:
        """Dollars: the price of the offers the jobs would rent first, times the expected hours."""
        return self.hours * self.rate()

    def describe(self) -> str:
        rate = self.rate()
        return (
            f"{len(self.jobs)} instances at ${rate:.3f}/h together; {self.hours:g} h expected: "
            f"about ${self.estimate():.2f} (plus boot time; billing stops only at destroy)"
        )


@dataclasses.dataclass(frozen=True)
class Outcome:
    label: str
    destroyed: bool
    finished: bool
    message: str


@dataclasses.dataclass(frozen=True)
class FleetConfig:
    """Timing and retry policy. Tests shrink the times; the CLI exposes them."""

    boot_timeout_s: float = 900.0
    poll_interval_s: float = 15.0
    max_attempts: int = 3
    quarantine_hours: float = 24.0
    parallelism: int = 8
    log_tail: int = 200

    def __post_init__(self):
        bad = [
            f"{field.name}={getattr(self, field.name)}"
            for field in dataclasses.fields(self)
            if getattr(self, field.name) <= 0
        ]
        if bad:
            raise redact.DevopsError(f"fleet timings and limits must be positive: {', '.join(bad)}")


class _OfferPool:
    """Ranked offers handed out once each, best first, to the launch threads."""

    def __init__(self, ranked: list[offers.ScoredOffer]):
        self._ranked = list(ranked)
        self._lock = threading.Lock()

    def take(self) -> offers.ScoredOffer | None:
        with self._lock:
            return self._ranked.pop(0) if self._ranked else None


class Fleet:
    """The commands over one account and one state file.

    `sink_for` builds the sink a record names; by default `durability.build_sink`
    with the host keys in the state folder.
    """

    def __init__(
        self,
        account: VastAccount,
        store: state.StateFile,
        progress: Progress,
        config: FleetConfig = FleetConfig(),
        *,
        sink_for: Callable[[durability.SinkSpec], durability.ResultsSink] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.account = account
        self.store = store
        self.sink_for = sink_for or functools.partial(durability.build_sink, known_hosts_dir=store.known_hosts_dir)
        self.progress = progress
        self.config = config
        self._clock = clock
        self._sleep = sleep

    # ---- launching -------------------------------------------------------------------------------------

    def plan(self, gates: offers.Gates, jobs: list[bootstrap.Job], *, launch_id: str, hours: float) -> Plan:
        """Searches and ranks offers for `jobs`; fails when fewer offers pass the gates than there are jobs."""
        if hours <= 0:
            raise redact.DevopsError(f"expected hours {hours} must be > 0 (used for the cost estimate)")
        choice = offers.search(self.account, gates, self.store.read().quarantined(self._clock()))
        self.progress(f"search: {choice.summary()}")
        if len(choice.ranked) < len(jobs):
            raise redact.DevopsError(
                f"{len(jobs)} jobs but only {len(choice.ranked)} offers pass the gates ({choice.summary()}); "
                "relax a gate (e.g. --max-dph, --min-reliability) or launch fewer jobs"
            )
        return Plan(
            launch_id=launch_id,
            jobs=jobs,
            choice=choice,
            hours=hours,
            disk_gb=gates.disk_gb,
            interruptible=gates.interruptible,
        )

    def launch(
        self,
        plan: Plan,
        setup: bootstrap.Bootstrap,
        spec: durability.SinkSpec,
        *,
        image: str,
        extra_env: dict[str, str] | None = None,
    ) -> list[state.Record]:
        """Starts every job of `plan` in parallel and waits for each to boot; returns the final records.

        `extra_env` (e.g. the git token) and the sink's credentials reach the
        instance as environment variables, never on its command line.
        """
        sink = self.sink_for(spec)
        if sink.upload_artifacts != setup.upload_artifacts or spec.remote_out != setup.out_dir():
            raise redact.DevopsError(
                f"the {spec.kind} sink does not match the bootstrap (upload_artifacts={setup.upload_artifacts}, "
                f"output {setup.out_dir()}): build both from the same options"
            )
        pool = _OfferPool(plan.choice.ranked)
        valid_for_s = int(setup.max_hours * 3600) + LAUNCH_CREDENTIALS_MARGIN_S
        env = {**sink.instance_env(launch_id=plan.launch_id, valid_for_s=valid_for_s), **(extra_env or {})}
        workers = max(1, min(self.config.parallelism, len(plan.jobs)))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as executor:
            futures = [
                executor.submit(
                    self._launch_job,
                    plan.launch_id,
                    index,
                    job,
                    pool,
                    setup,
                    spec,
                    image,
                    plan.disk_gb,
                    env,
                    plan.interruptible,
                )
                for index, job in enumerate(plan.jobs)
            ]
            return [future.result() for future in futures]

    def _launch_job(
        self,
        launch_id: str,
        index: int,
        job: bootstrap.Job,
        pool: _OfferPool,
        setup: bootstrap.Bootstrap,
        spec: durability.SinkSpec,
        image: str,
        disk_gb: float,
        env: dict[str, str],
        interruptible: bool,
    ) -> state.Record:
        onstart = bootstrap.render(setup, job)
        for attempt in range(1, self.config.max_attempts + 1):
            label = f"{LABEL_PREFIX}{launch_id}-{index:03d}-{attempt}"
            record = state.Record(
                label=label,
                launch_id=launch_id,
                target=job.target,
                seed=job.seed,
                run_id=job.run_id,
                sink=spec.kind,
                dest=spec.dest,
                remote_out=spec.remote_out,
                b2_bucket=spec.b2_bucket,
                attempts=attempt,
            )
            scored = pool.take()
            if scored is None:
                record = dataclasses.replace(record, status=state.FAILED, note="no offer left that passes the gates")
            else:
                record = dataclasses.replace(
                    record,
                    offer_id=scored.offer["id"],
                    machine_id=scored.offer.get("machine_id"),
                    dph_total=scored.price,
                )
            with self.store.update() as current:
                current.records[label] = record
            if scored is None:
                self.progress(f"{label}: {record.note}; job {job.run_id} not launched")
                return record
            record = self.create(
                record, scored.offer, image, disk_gb, onstart, env, bid=scored.price if interruptible else None
            )
            if record.status == state.BOOTING:
                record = self._await_boot(record)
            if record.status == state.RUNNING:
                return record
        return record

    def create(
        self,
        record: state.Record,
        offer: dict,
        image: str,
        disk_gb: float,
        onstart: str,
        env: dict[str, str],
        *,
        bid: float | None = None,
    ) -> state.Record:
        """Rents `offer` for `record` (already in the state file); the record after the create call."""
        kind = f"bid ${bid:.3f}/h" if bid is not None else f"${offer['dph_total']:.3f}/h"
        job = f"seed {record.seed}" if record.seed is not None else f"share {record.share}"
        self.progress(
            f"{record.label}: renting offer {offer['id']} (machine {offer.get('machine_id')}, "
            f"{kind}) for {record.target} {job}"
        )
        try:
            created = self.account.create_instance(
                offer["id"], image=image, disk_gb=disk_gb, label=record.label, onstart=onstart, env=env, bid=bid
            )
        except CreateOutcomeUnknown as error:
            # Left `launching` without an instance id: `reap` adopts an instance with its label, or fails it.
            self.progress(f"{record.label}: {error}; trying the next offer")
            return self.store.set(record.label, note=f"create failed, outcome unknown: {error}")
        except redact.DevopsError as error:
            self.progress(f"{record.label}: {error}; trying the next offer")
            return self.store.set(record.label, status=state.FAILED, note=str(error), ended_at=self._clock())
        if created.adopted:
            self.progress(
                f"{record.label}: a create call failed but instance {created.instance_id} has the label; adopting it"
            )
        return self.store.set(
            record.label, status=state.BOOTING, instance_id=created.instance_id, created_at=self._clock()
        )

    def _await_boot(self, record: state.Record) -> state.Record:
        deadline = self._clock() + self.config.boot_timeout_s
        status = None
        while self._clock() < deadline:
            try:
                row = self.account.instance(record.instance_id)
            except redact.DevopsError as error:
                self.progress(f"{record.label}: status check failed ({error}); retrying")
            else:
                if row is None:
                    return self.store.set(
                        record.label,
                        status=state.VANISHED,
                        ended_at=self._clock(),
                        note="the instance disappeared while booting",
                    )
                status = row.get("actual_status")
                if status == RUNNING:
                    self.progress(f"{record.label}: instance {record.instance_id} is running")
                    return self.store.set(record.label, status=state.RUNNING)
            self._sleep(self.config.poll_interval_s)
        reason = (
            f"instance {record.instance_id} never booted within {self.config.boot_timeout_s:g} s "
            f"(last status {status!r})"
        )
        with self.store.update() as current:
            current.quarantine_machine(record.machine_id, reason, hours=self.config.quarantine_hours, now=self._clock())
        self.progress(
            f"{record.label}: {reason}; machine {record.machine_id} quarantined for "
            f"{self.config.quarantine_hours:g} h; destroying it (it never ran, so there are no results)"
        )
        return self._destroy_now(record, note=reason)

    def _destroy_now(self, record: state.Record, *, note: str) -> state.Record:
        try:
            self.account.destroy_instance(record.instance_id)
        except redact.DevopsError as error:
            return self.store.set(record.label, note=f"{note}; destroy failed ({error}); run destroy again")
        return self.store.set(record.label, status=state.DESTROYED, ended_at=self._clock(), note=note)

    # ---- watching --------------------------------------------------------------------------------------

    def status(self, *, include_ended: bool = False) -> list[str]:
        """One line per record (live ones unless `include_ended`), then the spend totals.

        One instance whose log cannot be read has that error on its line; the
        others still show. Only the account's instance list is needed by all.
        """
        current = self.store.read()
        now = self._clock()
        rows = {row["id"]: row for row in self.account.instances()}
        lines = []
        for record in sorted(current.records.values(), key=lambda r: r.label):
            if record.status not in state.LIVE_STATUSES and not include_ended:
                continue
            row = rows.get(record.instance_id)
            remote = row.get("actual_status") if row else "gone"
            phase = self._phase_or_failure(record) if remote == RUNNING else ""
            lines.append(
                f"{record.label}  instance={record.instance_id} machine={record.machine_id} "
                f"{record.status}/{remote} {phase}  ${record.dph_total or 0:.3f}/h  "
                f"{record.hours(now):.2f} h  ${record.spend(now):.2f}  {record.note}".rstrip()
            )
        burn = sum(r.dph_total or 0.0 for r in current.live())
        total = sum(r.spend(now) for r in current.records.values())
        lines.append(f"live: {len(current.live())} instances, ${burn:.3f}/h; spent so far (estimate): ${total:.2f}")
        return lines

    def _phase_or_failure(self, record: state.Record) -> str:
        try:
            return self.run_phase(record)
        except redact.DevopsError as error:
            return f"(log query failed: {error})"

    def run_phase(self, record: state.Record) -> str:
        """ "done (exit N)", the bootstrap's current phase, or "starting", from the instance's log."""
        text = self.account.logs(record.instance_id, tail=self.config.log_tail)
        code = bootstrap.parse_done(text)
        if code is not None:
            return f"done (exit {code})"
        return bootstrap.parse_phase(text) or "starting"

    def logs(self, label: str, *, tail: int) -> str:
        """The last `tail` lines of the instance's log (redacted)."""
        return self.account.logs(self._record(label).instance_id, tail=tail)

    def _record(self, label: str) -> state.Record:
        record = self.store.read().records.get(label)
        if record is None or record.instance_id is None:
            raise redact.DevopsError(f"no instance is recorded under {label!r}; `status --all` lists the labels")
        return record

    # ---- ending ----------------------------------------------------------------------------------------

    def destroy(self, label: str, *, discard_results: bool = False) -> Outcome:
        """Secures the results of `label` (the durability gate), then destroys its instance.

        Not destroyed, with the reason in the outcome and the record: the run has
        not finished, or its results cannot be verified (the record becomes `kept`).
        `discard_results=True` skips the gate: an explicit decision to lose them. The
        gate is also skipped for an instance that never ran: never seen running by
        us and still in a not-started status (NOT_STARTED).
        """
        record = self._record(label)
        if record.status in (state.DESTROYED, state.VANISHED):
            return Outcome(label, destroyed=True, finished=True, message=f"already {record.status}")
        row = self.account.instance(record.instance_id)
        if row is None:
            self.store.set(label, status=state.VANISHED, ended_at=self._clock(), note="gone from the account")
            return Outcome(label, destroyed=True, finished=True, message="the instance is already gone")
        # Only an instance never seen running and still not started skips the gate: a record left
        # `booting` (an interrupted `up`, or adopted by `reap`) may belong to an instance that ran
        # unwatched and is now exited or offline.
        never_ran = record.status in (state.LAUNCHING, state.BOOTING) and row.get("actual_status") in NOT_STARTED
        if never_ran:
            note = "destroyed before it ever ran (no results)"
        elif discard_results:
            note = "destroyed with --discard-results: results NOT secured"
        else:
            log = self.account.logs(record.instance_id, tail=self.config.log_tail)
            code = bootstrap.parse_done(log)
            if code is None:
                phase = bootstrap.parse_phase(log) or "starting"
                return Outcome(
                    label,
                    destroyed=False,
                    finished=False,
                    message=f"kept: the run has not finished (phase {phase}); wait, or pass "
                    "--discard-results to lose its results",
                )
            try:
                secured = self.sink_for(durability.SinkSpec.of(record)).secure(record, row)
            except redact.DevopsError as error:
                self.store.set(label, status=state.KEPT, note=f"kept: {error}")
                return Outcome(
                    label,
                    destroyed=False,
                    finished=True,
                    message=f"KEPT (results not secured, instance still billing): {error}",
                )
            note = f"run exit {code}; {secured.summary}"
        ended = self._destroy_now(record, note=note)
        if ended.status != state.DESTROYED:
            return Outcome(label, destroyed=False, finished=True, message=ended.note)
        return Outcome(
            label,
            destroyed=True,
            finished=True,
            message=f"{note}; destroyed; spent about ${ended.spend(self._clock()):.2f}",
        )

    def destroy_many(self, labels: list[str], *, discard_results: bool = False) -> list[Outcome]:
        """`destroy` for each label, in parallel (each secures its own results)."""
        workers = max(1, min(self.config.parallelism, len(labels)))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as executor:
            outcomes = list(executor.map(lambda label: self._destroy_reporting(label, discard_results), labels))
        return outcomes

    def _destroy_reporting(self, label: str, discard_results: bool) -> Outcome:
        try:
            outcome = self.destroy(label, discard_results=discard_results)
        except redact.DevopsError as error:
            outcome = Outcome(label, destroyed=False, finished=False, message=f"error: {error}")
        self.progress(f"{label}: {outcome.message}")
        return outcome

    def collect(self, labels: list[str], *, deadline: float) -> list[Outcome]:
        """Destroys each instance once its run has finished and its results are secured, until `deadline`."""
        pending = list(labels)
        final: dict[str, Outcome] = {}
        while pending:
            for outcome in self.destroy_many(pending):
                if outcome.finished:
                    final[outcome.label] = outcome
            pending = [label for label in pending if label not in final]
            if not pending or self._clock() >= deadline:
                break
            self._sleep(self.config.poll_interval_s)
        for label in pending:
            final[label] = Outcome(
                label,
                destroyed=False,
                finished=False,
                message="still running at the deadline; kept (run `destroy` later)",
            )
            self.progress(f"{label}: {final[label].message}")
        return [final[label] for label in labels]

    def reap(self, *, destroy: bool) -> list[str]:
        """Finds our labelled instances the state file does not track as live; destroys them when `destroy`.

        Also reconciles live records: one whose create call never answered adopts
        the instance with its label (or becomes `failed` when there is none), one
        whose instance disappeared becomes `vanished`. An orphan has no
        trustworthy record, so nothing of it can be verified: it is listed first
        and destroyed only on request. Run it while no `up` is launching.
        """
        rows = [row for row in self.account.instances() if str(row.get("label") or "").startswith(LABEL_PREFIX)]
        present = {row["id"] for row in rows}
        lines = []
        with self.store.update() as current:
            by_label = {row["label"]: row for row in rows}
            for record in current.live():
                if record.instance_id is None and record.label in by_label:
                    row = by_label[record.label]
                    current.records[record.label] = dataclasses.replace(
                        record, instance_id=row["id"], status=state.BOOTING, created_at=self._clock()
                    )
                    lines.append(f"{record.label}: adopted instance {row['id']} (its create call never returned)")
                elif record.instance_id is None:
                    current.records[record.label] = dataclasses.replace(
                        record, status=state.FAILED, ended_at=self._clock(), note="no instance has its label"
                    )
                    lines.append(f"{record.label}: no instance has its label; marked failed")
                elif record.instance_id not in present:
                    current.records[record.label] = dataclasses.replace(
                        record, status=state.VANISHED, ended_at=self._clock(), note="gone from the account"
                    )
                    lines.append(f"{record.label}: instance {record.instance_id} is gone; marked vanished")
            tracked = {r.instance_id for r in current.live() if r.instance_id is not None}
        orphans = [row for row in rows if row["id"] not in tracked]
        for row in orphans:
            line = (
                f"orphan: instance {row['id']} label {row['label']} ({row.get('actual_status')}, "
                f"${row.get('dph_total') or 0:.3f}/h)"
            )
            if destroy:
                try:
                    self.account.destroy_instance(row["id"])
                    line += ": destroyed"
                except redact.DevopsError as error:
                    line += f": destroy failed ({error})"
            lines.append(line)
        if not orphans:
            lines.append("no orphans")
        elif not destroy:
            lines.append(f"{len(orphans)} orphans; run `reap --yes` to destroy them (their results are not verified)")
        for line in lines:
            self.progress(line)
        return lines
