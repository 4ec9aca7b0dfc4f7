"""The command line of managed launches: `up --sink store [--interruptible]` and `watch <launch>`.

    bazel run //rl/devops:vast_cli -- up --sink store --interruptible --instance-store-file ~/instances.json \\
        --repo ... --commit ... --target //experiments/mess3:reward_only --seeds 0-3 --hours 3 --budget 20 --yes --wait
    bazel run //rl/devops:vast_cli -- watch <launch> [--budget 15]     # again, from any shell, at any time
    bazel run //rl/devops:vast_cli -- up --sink store --interruptible --instance-store-file ~/instances.json \\
        --repo ... --commit ... --study //experiments/mess3:belief_study --instances 3 --hours 3 --budget 20 --yes --wait

`cli.py` parses and dispatches; this module does what a managed launch adds (docs/vast.md, "Recovery").
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

from rl.devops.vast import bootstrap, fleet, managed, offers, preflight, redact, store_runs, study_launch
from rl.harness.remote import stores


def add_arguments(up: argparse.ArgumentParser, commands) -> None:
    group = up.add_argument_group("managed launches (--sink store)")
    group.add_argument(
        "--instance-store-file",
        help="store file (chmod 600) with the key the instances get: "
        "the same store as this machine's, a key limited to its bucket and prefix",
    )
    group.add_argument(
        "--silence-timeout",
        type=float,
        default=900.0,
        help="seconds without a heartbeat of the run in the store before its instance counts as lost",
    )
    group.add_argument(
        "--start-timeout",
        type=float,
        default=3 * 3600.0,
        help="seconds from renting to the run's first record in the store (install and build)",
    )
    group.add_argument("--max-instances", type=int, default=4, help="instances per job, replacements included")
    watch = commands.add_parser(
        "watch",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="keep a managed launch going (safe to run again, or twice)",
    )
    watch.add_argument("launch")
    watch.add_argument("--budget", type=float, help="a new cap in dollars for the launch (spent + projected)")
    watch.add_argument("--hours", type=float, help="stop watching after this long (default: until every job ended)")
    watch.add_argument("--instance-store-file", help="as for `up`: the key replacements get")


def _instance_env(config, path) -> dict[str, str]:
    env = preflight.instance_store_env(config, path)
    token = os.environ.get(bootstrap.GIT_TOKEN_ENV, "")
    if token:
        redact.register_secret(token)
        env[bootstrap.GIT_TOKEN_ENV] = token
    return env


def _watcher(fl: fleet.Fleet, config, launch_id: str, env: dict[str, str]) -> managed.Watcher:
    with redact.guarded("open the store"):
        store = stores.open_store(config)
    runs = store_runs.StoreRuns(store)
    launch = managed.launch_of(fl.store.read(), launch_id)
    if launch.study_id is not None:
        runs = study_launch.ShareRuns(runs, fl.store, launch)
    return managed.Watcher(fl, runs, launch_id, instance_env=env)


def _report(fl: fleet.Fleet, launch: managed.Launch) -> int:
    print("\n".join(managed.describe(fl.store.read(), launch.launch_id, time.time())))
    if launch.study_id is not None:
        print(
            f"study {launch.study_id}: `bazel run {launch.shares[0].target} -- --resume {launch.study_id}` gathers its"
            " shares from the store, runs what is not completed and writes its summary"
        )
    return 0 if all(share.status == managed.COMPLETED for share in launch.shares) else 1


def up(
    args: argparse.Namespace,
    fl: fleet.Fleet,
    gates: offers.Gates,
    setup: bootstrap.Bootstrap,
    jobs: list[bootstrap.Job],
    launch_id: str,
    path,
) -> int:
    """A managed launch: checks (nothing rented on bad input), the plan, then the first pass of its watcher."""
    study = jobs[0].share is not None
    config = preflight.store_for(sink=args.sink, interruptible=args.interruptible, instances=len(jobs), study=study)
    env = _instance_env(config, path)
    plan = fl.plan(gates, jobs, launch_id=launch_id, hours=args.hours)
    print(f"launch {launch_id} (managed): {plan.describe()}")
    managed.instance_hour_floor(gates, plan.choice, args.budget)
    if not preflight.ready_to_launch(plan.estimate(), budget=args.budget, confirmed=args.yes, setup=setup):
        return 0
    setup = dataclasses.replace(setup, upload_artifacts=True, self_end=True)
    launch = managed.Launch.new(
        launch_id,
        jobs,
        setup,
        gates,
        image=args.image,
        budget=args.budget,
        boot_timeout_s=args.boot_timeout,
        start_timeout_s=args.start_timeout,
        silence_s=args.silence_timeout,
        max_instances=args.max_instances,
    )
    managed.record_launch(fl.store, launch)
    watcher = _watcher(fl, config, launch_id, env)
    watcher.tick()
    if not args.wait:
        _report(fl, managed.launch_of(fl.store.read(), launch_id))
        print(f"launched; keep it going with `watch {launch_id}` (it replaces lost instances)")
        return 0
    return _report(fl, watcher.watch(time.time() + launch.deadline_s() * launch.max_instances))


def up_study(args: argparse.Namespace, fl: fleet.Fleet, gates: offers.Gates, setup: bootstrap.Bootstrap, path) -> int:
    """`up --study <target> --instances K`: a managed launch of K shares of the study's members (study_launch.py)."""
    preflight.check_study(args.study, seeds=args.seeds, instances=args.instances)
    launch_id = fleet.new_launch_id()
    jobs = study_launch.jobs(args.study, args.instances, launch_id=launch_id, extra_args=tuple(args.run_args))
    return up(args, fl, gates, setup, jobs, launch_id, path)


def watch(args: argparse.Namespace, fl: fleet.Fleet, path) -> int:
    """`watch <launch>`: passes of the launch's watcher until every share ended (or --hours)."""
    launch = managed.launch_of(fl.store.read(), args.launch)
    if args.budget is not None:
        with fl.store.update() as current:
            changed = dataclasses.replace(managed.launch_of(current, args.launch), budget=args.budget)
            current.launches[args.launch] = changed.to_json()
    config = preflight.store_for(
        sink="store", interruptible=False, instances=len(launch.shares), study=launch.study_id is not None
    )
    watcher = _watcher(fl, config, args.launch, _instance_env(config, path))
    hours = args.hours if args.hours is not None else launch.deadline_s() * launch.max_instances / 3600
    return _report(fl, watcher.watch(time.time() + hours * 3600))
