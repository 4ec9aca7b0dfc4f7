"""Which GPU a study member sees: what each Tune trial asks for, and the devices its run is shown.

    share = member_devices.gpu_share(gpu_count=1, members_at_once=4)        # 0.25: four members per GPU
    share = member_devices.cluster_gpu_share(ray.cluster_resources(), members=10, cpus_per_member=1,
                                             max_concurrent=None)         # the same, from what Ray has
    tune.with_resources(trainable, member_devices.trial_resources(cpus=1, gpus=share))
    # in the trial, before it starts the member's run:
    env = {**env, **member_devices.visible_devices(ray.get_gpu_ids())}    # {"CUDA_VISIBLE_DEVICES": "0"}

Ray sets CUDA_VISIBLE_DEVICES for a task that asked for GPUs, to the ones it was given (a fraction
of a GPU shares that GPU's id). For a task that asked for none, Ray 2.56 leaves the variable as it
was, so a member's run would see, and take, every GPU of the machine. A member's run is a child
process with an environment of its own: it is shown exactly the devices its trial was given, and
none when it was given none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"


def gpu_share(*, gpu_count: int, members_at_once: int) -> float:
    """GPUs each member asks for: a whole one while there are enough, else an equal fraction, so that
    ceil(members_at_once / gpu_count) members share each GPU; 0 on a machine without GPUs."""
    if gpu_count < 0 or members_at_once < 1:
        raise ValueError(f"gpu_count={gpu_count} must be >= 0 and members_at_once={members_at_once} >= 1")
    if gpu_count == 0:
        return 0.0
    return 1.0 / math.ceil(members_at_once / gpu_count) if members_at_once > gpu_count else 1.0


def cluster_gpu_share(
    resources: Mapping[str, float], *, members: int, cpus_per_member: float, max_concurrent: int | None
) -> float:
    """`gpu_share` for `members` on a Ray cluster with `resources` (`ray.cluster_resources()`): as many run at
    once as its CPUs (and `max_concurrent`) allow."""
    at_once = min(members, max_concurrent or members, max(1, int(resources.get("CPU", 1) // cpus_per_member)))
    return gpu_share(gpu_count=int(resources.get("GPU", 0)), members_at_once=at_once)


def trial_resources(*, cpus: float, gpus: float) -> dict[str, float]:
    """The resources a member's trial asks Tune for (`tune.with_resources`)."""
    if cpus <= 0 or gpus < 0:
        raise ValueError(f"cpus={cpus} must be > 0 and gpus={gpus} >= 0")
    return {"cpu": cpus, "gpu": gpus} if gpus else {"cpu": cpus}


def visible_devices(gpu_ids: Iterable) -> dict[str, str]:
    """The environment that shows a member's run the GPUs its trial was given (`ray.get_gpu_ids()`), and
    hides every GPU when it was given none."""
    return {VISIBLE_DEVICES_ENV: ",".join(str(gpu) for gpu in gpu_ids)}
