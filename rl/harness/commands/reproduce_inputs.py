"""What `reproduce` takes from the original run besides its code: its CPU limit, and its metrics wherever they are.

    share = reproduce_inputs.recorded_cpu_share(manifest)   # 1 if the run ran under $RL_HARNESS_CPUS=1, else None
    source = reproduce_inputs.bring_metrics(run_id, layout)  # "metrics.jsonl", fetched from the store if need be, or None

A run that sized itself by `$RL_HARNESS_CPUS` (a study's member) placed its work by that share, so
its reproduction runs under the same share, whatever this shell sets. A run's metrics live in its
artifacts folder, which a shared run often lacks: the configured store (docs/artifact_storage.md)
is asked for them before `reproduce` gives up on rows. Where they are nowhere and the numeric
platform differs, the verdict is statistical anyway and rests on the committed summary
(`SUMMARY_EVIDENCE`).
"""

from __future__ import annotations

from rl.harness import env_vars
from rl.harness.commands import transfer
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import RunManifest

LOCAL_EVIDENCE = f"its {records.METRICS_FILE} on this machine"
SUMMARY_EVIDENCE = (
    f"its committed {records.SUMMARY_FILE} (final metrics and scores): its {records.METRICS_FILE} is nowhere"
)


def recorded_cpu_share(manifest: RunManifest) -> int | None:
    """The CPUs the run sized itself by when `$RL_HARNESS_CPUS` set them (its machine's `cpu_limit` says so), else None."""
    machine = manifest.hardware.get("machine") or {}
    if str(machine.get("cpu_limit", "")).startswith(f"${env_vars.CPU_SHARE_ENV}="):
        return int(machine["cpu_count"])
    return None


def bring_metrics(run_id: str, layout: RunLayout) -> str | None:
    """Where the original's metrics are read from (the evidence, in words): this machine, or the configured store
    (fetched into `layout`'s artifacts folder, verified, saying so in one line); None when neither has them."""
    path = layout.artifacts_dir / records.METRICS_FILE
    if path.exists():
        return LOCAL_EVIDENCE
    remote = transfer.stored_run(run_id)
    if remote is None:
        return None
    remote.fetch(layout, only=f"artifacts/{records.METRICS_FILE}")
    if not path.exists():
        return None
    print(
        f"metrics of run {run_id} are not on this machine: fetched from {remote.store.config.url} into {path},"
        " verified by sha256",
        flush=True,
    )
    return f"its {records.METRICS_FILE} from {remote.store.config.url}"
