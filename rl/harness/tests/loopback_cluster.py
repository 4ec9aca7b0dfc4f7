"""A real multi-node Ray cluster on this machine for the slow tests: a head and workers as separate raylets.

    with loopback_cluster.running(head_cpus=0, worker_cpus=[3]) as cluster:
        run_helpers.run_cli([..., "--ray-address", cluster.address])
        cluster.worker_ids[0]          # a worker's Ray node id, to compare with where runners ran
        cluster.kill(node_id)          # node loss: every process of that node, SIGKILL

    with loopback_cluster.running(head_cpus=1, worker_cpus=[1], environments=[{"HOME": a}, {"HOME": b}]):
        ...                            # each node (head first) started with those variables set

    with loopback_cluster.running(head_cpus=1, worker_cpus=[1], disks=[{artifacts: worker_disk}]):
        ...                            # the worker's processes see `worker_disk` at `artifacts`: no shared disk

Ray's own multi-node test utility (`ray.cluster_utils.Cluster`) starts each node's GCS, raylet
and object store from this process, with its own node name and the custom resource WORKER_RESOURCE
on workers, under a fresh short temp dir (Unix socket paths must stay under 108 bytes) and
random ports. Leaving the block removes every node, kills whatever process still names the temp
dir, and fails the test if it had to: a test never leaves raylets behind.

A worker given `disks` is started inside a mount namespace of its own, in which each
folder is a bind mount of another: what its processes write there, the head and the driver never see,
as on machines that share no disk. The test is skipped, naming why, where mounting is not allowed.
"""

import contextlib
import ctypes
import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

WORKER_RESOURCE = "rl_harness_worker"
_SHUTDOWN_S = 30
_CLONE_NEWNS = 0x00020000  # unshare(2): a mount namespace of the calling thread's own
_CLONE_FS = 0x00000200  # unshare(2): its root and working folder no longer shared with the threads it started


@dataclasses.dataclass
class LoopbackCluster:
    address: str
    head_id: str
    worker_ids: list
    temp_dir: str
    _cluster: object
    _nodes: dict

    def kill(self, node_id: str) -> None:
        """Node loss: SIGKILL to every process of that worker node (raylet, object store, its workers)."""
        self._cluster.remove_node(self._nodes.pop(node_id), allow_graceful=False)
        self.worker_ids.remove(node_id)


def processes_naming(text: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if text.encode() in handle.read():
                        pids.append(int(entry))
            except OSError:  # gone meanwhile
                continue
    return pids


def _with_own_disks(disks: dict, start):
    """start() inside a mount namespace (inherited by what it starts) that shows each folder of `disks` as its
    value; then back to this process's own mounts. In the calling thread: Ray sets signal handlers there."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY)
    try:
        if libc.unshare(_CLONE_NEWNS) != 0:
            pytest.skip(
                f"cannot give a loopback node a disk of its own (needs root with CAP_SYS_ADMIN): "
                f"{os.strerror(ctypes.get_errno())}"
            )
        try:
            subprocess.run(["mount", "--make-rprivate", "/"], check=True)
            for folder, disk in disks.items():
                subprocess.run(["mount", "--bind", str(disk), str(folder)], check=True)
            return start()
        finally:
            # setns refuses a thread that shares its file-system state (with the threads Ray started meanwhile)
            if libc.unshare(_CLONE_FS) != 0 or libc.setns(own, _CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "could not return to this process's mounts (setns)")
    finally:
        os.close(own)


@contextlib.contextmanager
def running(*, head_cpus: int, worker_cpus: list, environments: list | None = None, disks: list | None = None):
    """A head with `head_cpus` CPUs and one worker node per entry of `worker_cpus`; `environments` (head first):
    variables each node's processes (its raylet, and so its workers) start with; `disks` (workers only):
    {folder: another folder} that worker's processes see in its place."""
    from ray.cluster_utils import Cluster

    environments = environments or [{}] * (1 + len(worker_cpus))
    disks = disks or []
    saved = dict(os.environ)

    def environ(node: int) -> None:  # the nodes' worker processes import the harness (callbacks pickled by the driver)
        os.environ.clear()
        os.environ.update({**saved, "PYTHONPATH": os.pathsep.join(sys.path), **environments[node]})

    temp_dir = tempfile.mkdtemp(prefix="rlh-ray-", dir="/tmp")
    cluster = None
    try:
        environ(0)
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": head_cpus,
                "node_name": "head",
                "temp_dir": temp_dir,
                "include_dashboard": False,
            },
        )
        nodes = {cluster.head_node.node_id: cluster.head_node}
        workers = []
        for index, cpus in enumerate(worker_cpus, start=1):
            environ(index)
            add = functools.partial(
                cluster.add_node, num_cpus=cpus, node_name=f"worker-{index}", resources={WORKER_RESOURCE: 1}
            )
            node = _with_own_disks(disks[index - 1], add) if index <= len(disks) else add()
            nodes[node.node_id] = node
            workers.append(node.node_id)
        os.environ.clear()
        os.environ.update({**saved, "PYTHONPATH": os.pathsep.join(sys.path)})
        yield LoopbackCluster(
            cluster.address,
            cluster.head_node.node_id,
            workers,
            temp_dir,
            cluster,
            {node_id: nodes[node_id] for node_id in workers},
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if cluster is not None:
            cluster.shutdown()
        deadline = time.monotonic() + _SHUTDOWN_S
        while processes_naming(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = processes_naming(temp_dir)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not leftovers, f"the loopback cluster left processes behind (killed now): {leftovers}"
