"""The vast.ai command line: search, up, watch, status, logs, destroy, reap, quarantine.

    bazel run //rl/devops:vast_cli -- search --max-dph 0.8
    bazel run //rl/devops:vast_cli -- up --repo https://github.com/me/research.git --commit <sha> \\
        --target //experiments/mess3:reward_only --seeds 0-3 --hours 3 --dest vast_results --yes --wait
    bazel run //rl/devops:vast_cli -- watch ab12cd       # a managed launch (--sink store): managed_cli.py
    bazel run //rl/devops:vast_cli -- status
    bazel run //rl/devops:vast_cli -- logs rlh-ab12cd-000-1 --tail 100
    bazel run //rl/devops:vast_cli -- destroy --launch ab12cd      # secures results first
    bazel run //rl/devops:vast_cli -- reap [--yes]
    bazel run //rl/devops:vast_cli -- quarantine add 1234 --hours 48 --reason "CUDA errors"

The API key comes from $VAST_API_KEY or --api-key-file (never a flag value,
which `ps` would show). Progress goes to stderr, results to stdout. Exit
status: 0 done, 1 error, 2 bad usage or input (nothing rented), 3 some instance was kept (its results
are not secured yet, or its run has not finished). docs/vast.md has the guide.
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import sys
import time
import traceback
from collections.abc import Sequence

from rl.devops.vast import api, bootstrap, durability, fleet, managed, managed_cli, offers, preflight, redact, state

EXIT_KEPT = 3
DEFAULT_SEED = 42


def _path(text: str) -> pathlib.Path:
    """A path; relative ones are taken from where `bazel run` was started (BUILD_WORKING_DIRECTORY)."""
    path = pathlib.Path(text).expanduser()
    return path if path.is_absolute() else pathlib.Path(os.environ.get("BUILD_WORKING_DIRECTORY", ".")) / path


def _default_state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "rl-harness", "vast")


def _seeds(text: str) -> list[int]:
    """ "0-3" -> [0, 1, 2, 3]; "1,4,9" -> [1, 4, 9]."""
    try:
        if "-" in text:
            first, last = (int(part) for part in text.split("-", 1))
            seeds = list(range(first, last + 1))
        else:
            seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: write a range like 0-3 or a list like 1,4,9") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"seeds {text!r} is an empty range")
    return seeds


def _gate_arguments() -> argparse.ArgumentParser:
    defaults = offers.Gates()
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("offer gates (hard requirements)")
    group.add_argument("--num-gpus", type=int, default=defaults.num_gpus)
    group.add_argument(
        "--gpu-name",
        action="append",
        default=[],
        help="allowed GPU model, e.g. 'RTX 4090' (repeat for several; default: any)",
    )
    group.add_argument("--min-reliability", type=float, default=defaults.min_reliability)
    group.add_argument("--allow-unverified", action="store_true", help="accept unverified machines")
    group.add_argument("--min-cuda", type=float, default=defaults.min_cuda)
    group.add_argument("--disk-gb", type=float, default=defaults.disk_gb, help="disk to rent (and require)")
    group.add_argument("--min-cpu-cores", type=float, default=defaults.min_cpu_cores)
    group.add_argument("--max-dph", type=float, default=defaults.max_dph, help="price cap, $ per hour per instance")
    group.add_argument("--exclude-machine", type=int, action="append", default=[], help="machine id never to rent")
    group.add_argument(
        "--interruptible",
        action="store_true",
        help="bid offers (cheaper; an instance may be stopped when outbid), bidding at most --max-dph;"
        " `up` needs --sink store, whose runs resume on a replacement",
    )
    return parser


def _gates(args: argparse.Namespace) -> offers.Gates:
    return offers.Gates(
        num_gpus=args.num_gpus,
        gpu_names=tuple(args.gpu_name),
        min_reliability=args.min_reliability,
        require_verified=not args.allow_unverified,
        min_cuda=args.min_cuda,
        disk_gb=args.disk_gb,
        min_cpu_cores=args.min_cpu_cores,
        max_dph=args.max_dph,
        excluded_machines=frozenset(args.exclude_machine),
        interruptible=args.interruptible,
    )


def _sink_arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("where results go before an instance is destroyed")
    group.add_argument(
        "--sink",
        choices=(durability.COPY, durability.B2, durability.STORE),
        default=durability.COPY,
        help="copy: rsync everything back over SSH; b2: copy results/, verify artifacts in B2 "
        "(the harness uploads them with its B2 credentials from this machine); store: a managed "
        "launch, its runs mirrored to the configured store, lost instances replaced",
    )
    group.add_argument("--dest", default="vast_results", help="local folder for copied results (<dest>/<run-id>/)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vast_cli", description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--server-url", help="vast.ai API server (default: the SDK's, or $VAST_URL)")
    parser.add_argument(
        "--api-key-file", help=f"used when ${api.API_KEY_ENV} is unset (default {api.DEFAULT_KEY_FILE})"
    )
    parser.add_argument("--state-dir", default=_default_state_dir(), help="state file, lock and known_hosts.d/")
    parser.add_argument("--request-timeout", type=float, default=60.0, help="seconds per API request")
    parser.add_argument("--retries", type=int, default=3, help="attempts per API request (transient errors)")
    parser.add_argument("--poll-interval", type=float, default=15.0, help="seconds between status checks")
    parser.add_argument("--debug", action="store_true", help="print a (redacted) traceback on errors")
    commands = parser.add_subparsers(dest="command", required=True)
    gates, sink = _gate_arguments(), _sink_arguments()
    formatter = argparse.ArgumentDefaultsHelpFormatter

    search = commands.add_parser(
        "search", parents=[gates], formatter_class=formatter, help="rank the offers that pass the gates"
    )
    search.add_argument("--show", type=int, default=10, help="how many offers to print")

    up = commands.add_parser(
        "up", parents=[gates, sink], formatter_class=formatter, help="launch one instance per (target, seed)"
    )
    up.add_argument(
        "--repo", required=True, help=f"experiment repository URL (no credentials: use ${bootstrap.GIT_TOKEN_ENV})"
    )
    up.add_argument("--commit", required=True, help="its full 40-digit commit")
    up.add_argument(
        "--library",
        help="library repository URL, built instead of the experiment repo's pin "
        f"(as ${bootstrap.LIBRARY_CHECKOUT_ENV})",
    )
    up.add_argument("--library-commit", help="its full commit")
    what = up.add_mutually_exclusive_group(required=True)
    what.add_argument("--target", action="append", help="Bazel target (repeat for several)")
    what.add_argument("--study", help="a study's Bazel target (rl_study): its own agents x seeds on rented instances")
    up.add_argument("--seeds", type=_seeds, help=f"with --target: e.g. 0-3 or 1,4,9 (default {DEFAULT_SEED})")
    up.add_argument("--instances", type=int, default=1, help="with --study: instances its members are spread over")
    up.add_argument("--image", default="python:3.11-bookworm", help="Docker image (Debian-based, Python 3.11)")
    up.add_argument("--hours", type=float, required=True, help="expected run time, for the cost estimate")
    up.add_argument("--max-hours", type=float, default=12.0, help="the run is stopped (SIGTERM) after this")
    up.add_argument(
        "--budget",
        type=float,
        help="refuse to launch when the estimate exceeds this many dollars (a "
        "managed launch: also never pass it while running, spent + projected to the deadlines)",
    )
    up.add_argument("--boot-timeout", type=float, default=900.0, help="seconds before a machine counts as dead")
    up.add_argument("--quarantine-hours", type=float, default=24.0, help="how long a dead machine is avoided")
    up.add_argument("--parallel", type=int, default=8, help="instances launched at once")
    up.add_argument("--yes", action="store_true", help="launch (without it: print the plan and cost only)")
    up.add_argument("--wait", action="store_true", help="then wait for the runs, secure results, destroy")
    up.add_argument("run_args", nargs="*", help="after --: extra arguments for every run")
    managed_cli.add_arguments(up, commands)

    status = commands.add_parser("status", formatter_class=formatter, help="instances, phases and spend")
    status.add_argument("--all", action="store_true", help="include destroyed and failed records")

    logs = commands.add_parser("logs", formatter_class=formatter, help="an instance's log (redacted)")
    logs.add_argument("label")
    logs.add_argument("--tail", type=int, default=200)

    destroy = commands.add_parser(
        "destroy", formatter_class=formatter, help="secure results (durability gate), then destroy"
    )
    destroy.add_argument("labels", nargs="*")
    destroy.add_argument("--launch", help="every live instance of this launch id")
    destroy.add_argument(
        "--discard-results", action="store_true", help="skip the durability gate: the results are lost"
    )

    reap = commands.add_parser(
        "reap",
        formatter_class=formatter,
        help="find (and with --yes destroy) our instances the state file does not track",
    )
    reap.add_argument("--yes", action="store_true")

    quarantine = commands.add_parser("quarantine", formatter_class=formatter, help="machines to avoid")
    actions = quarantine.add_subparsers(dest="action", required=True)
    actions.add_parser("list")
    add = actions.add_parser("add")
    add.add_argument("machine", type=int)
    add.add_argument("--hours", type=float, required=True)
    add.add_argument("--reason", required=True)
    remove = actions.add_parser("remove")
    remove.add_argument("machine", type=int)
    return parser


def _account(args: argparse.Namespace) -> api.VastAccount:
    key = api.read_api_key(_path(args.api_key_file) if args.api_key_file else None)
    return api.VastAccount(key, args.server_url, request_timeout_s=args.request_timeout, retries=args.retries)


def _fleet(args: argparse.Namespace, fleet_config: fleet.FleetConfig) -> fleet.Fleet:
    return fleet.Fleet(_account(args), state.StateFile(_path(args.state_dir)), fleet.Progress(sys.stderr), fleet_config)


def _pin(url: str | None, commit: str | None, what: str) -> bootstrap.GitPin | None:
    if url is None and commit is None:
        return None
    if not (url and commit):
        raise redact.DevopsError(f"give both --{what} and --{what}-commit")
    return bootstrap.GitPin(url, commit)


def _up(args: argparse.Namespace) -> int:
    fleet_config = fleet.FleetConfig(
        boot_timeout_s=args.boot_timeout,
        poll_interval_s=args.poll_interval,
        quarantine_hours=args.quarantine_hours,
        parallelism=args.parallel,
    )
    setup = bootstrap.Bootstrap(
        repo=bootstrap.GitPin(args.repo, args.commit),
        library=_pin(args.library, args.library_commit, "library"),
        upload_artifacts=args.sink == durability.B2,
        max_hours=args.max_hours,
    )
    path = _path(args.instance_store_file) if args.instance_store_file else None
    if args.study is not None:
        return managed_cli.up_study(args, _fleet(args, fleet_config), _gates(args), setup, path)
    if args.instances != 1:
        raise redact.BadInput(
            f"--instances {args.instances} spreads a study's members (--study); with --target each"
            " (target, seed) gets an instance of its own: drop --instances"
        )
    seeds = args.seeds or [DEFAULT_SEED]
    if args.sink == durability.STORE or args.interruptible:
        launch_id = fleet.new_launch_id()
        jobs = fleet.make_jobs(args.target, seeds, launch_id=launch_id, extra_args=tuple(args.run_args))
        return managed_cli.up(args, _fleet(args, fleet_config), _gates(args), setup, jobs, launch_id, path)
    bucket = durability.b2_credentials().bucket if args.sink == durability.B2 else None
    spec = durability.SinkSpec(kind=args.sink, dest=str(_path(args.dest)), remote_out=setup.out_dir(), b2_bucket=bucket)
    launch_id = fleet.new_launch_id()
    jobs = fleet.make_jobs(args.target, seeds, launch_id=launch_id, extra_args=tuple(args.run_args))
    fl = _fleet(args, fleet_config)
    plan = fl.plan(_gates(args), jobs, launch_id=launch_id, hours=args.hours)
    print(f"launch {launch_id}: {plan.describe()}")
    for job, scored in zip(plan.jobs, plan.choice.ranked):
        print(
            f"  {job.target} seed {job.seed} -> offer {scored.offer['id']} (machine {scored.offer['machine_id']}, "
            f"{scored.offer.get('gpu_name')}, ${scored.price:.3f}/h, score {scored.score:.1f})"
        )
    if not preflight.ready_to_launch(plan.estimate(), budget=args.budget, confirmed=args.yes, setup=setup):
        return 0
    token = os.environ.get(bootstrap.GIT_TOKEN_ENV, "")
    if token:
        redact.register_secret(token)
    records = fl.launch(
        plan, setup, spec, image=args.image, extra_env={bootstrap.GIT_TOKEN_ENV: token} if token else None
    )
    running = [record for record in records if record.status == state.RUNNING]
    for record in records:
        print(f"{record.label}  {record.status}  instance={record.instance_id}  {record.note}".rstrip())
    if args.wait and running:
        deadline = time.time() + (args.max_hours * 3600 + args.boot_timeout + 3600)
        outcomes = fl.collect([record.label for record in running], deadline=deadline)
        return 0 if all(outcome.destroyed for outcome in outcomes) and len(running) == len(records) else EXIT_KEPT
    return 0 if len(running) == len(records) else 1


def _destroy(args: argparse.Namespace) -> int:
    fl = _fleet(args, fleet.FleetConfig(poll_interval_s=args.poll_interval))
    labels = list(args.labels)
    if args.launch:
        labels += [r.label for r in fl.store.read().live() if r.launch_id == args.launch]
    if not labels:
        raise redact.DevopsError("name the instances to destroy: labels (see `status`) or --launch ID")
    outcomes = fl.destroy_many(labels, discard_results=args.discard_results)
    return 0 if all(outcome.destroyed for outcome in outcomes) else EXIT_KEPT


def _quarantine(args: argparse.Namespace) -> int:
    store = state.StateFile(_path(args.state_dir))
    if args.action == "add":
        with store.update() as current:
            current.quarantine_machine(args.machine, args.reason, hours=args.hours)
    elif args.action == "remove":
        with store.update() as current:
            if current.quarantine.pop(args.machine, None) is None:
                raise redact.DevopsError(f"machine {args.machine} is not quarantined")
    for machine, entry in sorted(store.read().quarantine.items()):
        until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(entry["until"]))
        expired = " (expired)" if entry["until"] <= time.time() else ""
        print(f"{machine}  until {until}{expired}  {entry['reason']}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.command == "up":
        return _up(args)
    if args.command == "destroy":
        return _destroy(args)
    if args.command == "quarantine":
        return _quarantine(args)
    fl = _fleet(args, fleet.FleetConfig(poll_interval_s=args.poll_interval))
    if args.command == "search":
        choice = offers.search(fl.account, _gates(args), fl.store.read().quarantined())
        print(choice.summary())
        for scored in choice.ranked[: args.show]:
            o = scored.offer
            print(
                f"offer {o['id']}  machine {o['machine_id']}  {o.get('num_gpus')}x {o.get('gpu_name')}  "
                f"${scored.price:.3f}/h  reliability {o['reliability']:.3f}  dlperf {o['dlperf']:.1f}  "
                f"score {scored.score:.1f}"
            )
    elif args.command == "status":
        print("\n".join(fl.status(include_ended=args.all)))
        current = fl.store.read()
        for launch_id in sorted(current.launches):
            shares = managed.launch_of(current, launch_id).shares
            if args.all or any(share.status == managed.ACTIVE for share in shares):
                print("\n".join(managed.describe(current, launch_id, time.time())))
    elif args.command == "watch":
        path = _path(args.instance_store_file) if args.instance_store_file else None
        return managed_cli.watch(args, fl, path)
    elif args.command == "logs":
        print(fl.logs(args.label, tail=args.tail), end="")
    elif args.command == "reap":
        fl.reap(destroy=args.yes)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; every error is printed as one redacted line (a redacted traceback with --debug)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    redact.install_log_filter("", "vastai", "b2sdk")
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("interrupted: `status` shows what was launched; `reap` finds anything unrecorded", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the one place every error is reported, redacted
        if args.debug:
            print(redact.redact("".join(traceback.format_exception(error))), file=sys.stderr)
        message = str(error) if isinstance(error, redact.DevopsError) else redact.describe(error)
        print(f"error: {message}", file=sys.stderr)
        return 2 if isinstance(error, redact.BadInput) else 1


if __name__ == "__main__":
    sys.exit(main())
