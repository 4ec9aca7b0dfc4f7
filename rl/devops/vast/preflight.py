"""Checks before anything is rented: each bad input ends in one line naming the fix, and nothing is rented.

from rl.devops.vast import preflight

preflight.check_pushed(bootstrap.GitPin(url, commit))      # the instances can fetch the commit
config = preflight.store_for(sink="store", interruptible=True, instances=3)   # the store they resume from
preflight.check_study("//experiments/mess3:belief_study", seeds=None, instances=2)   # before store_for(study=True)
env = preflight.instance_store_env(config, path)            # what an instance gets to reach that store
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import tempfile

from rl.devops.vast import bootstrap, durability, redact
from rl.harness import env_vars
from rl.harness.remote import store as remote_store
from rl.harness.remote import stores

FETCH_TIMEOUT_S = 120.0


def check_pushed(pin: bootstrap.GitPin) -> None:
    """DevopsError unless `pin.commit` can be fetched from `pin.url`, as the instances fetch it.

    A shallow fetch of that one commit into an empty repository: what the bootstrap does first. A
    private repository is read with this machine's own git credentials (never prompted for).
    """
    with tempfile.TemporaryDirectory(prefix="rlh-pushed-") as folder:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        with redact.guarded(f"check that {pin.url} has commit {pin.commit}"):
            subprocess.run(["git", "init", "-q", folder], check=True, capture_output=True, timeout=30)
            fetched = subprocess.run(
                ["git", "-C", folder, "fetch", "-q", "--depth", "1", "--", pin.url, pin.commit],
                capture_output=True,
                text=True,
                timeout=FETCH_TIMEOUT_S,
                env=env,
                check=False,
            )
        if fetched.returncode != 0:
            raise redact.BadInput(
                f"commit {pin.commit} cannot be fetched from {pin.url}, which the instances fetch it from "
                f"({redact.redact(fetched.stderr.strip().splitlines()[-1] if fetched.stderr.strip() else 'no reason given')});"
                " push it (git push) or pin a pushed commit"
            )


def check_study(study: str, *, seeds: list[int] | None, instances: int) -> None:
    """BadInput for what a study launch cannot take: seeds of its own (the study declares them), no instance."""
    if seeds is not None:
        raise redact.BadInput(
            f"--seeds goes with --target: study {study} runs the seeds its STUDY declares; drop"
            " --seeds (add seeds to a study with `study --resume <study-id> --seeds ...`)"
        )
    if instances < 1:
        raise redact.BadInput(f"--instances {instances}: a study needs at least one instance")


def store_for(
    *, sink: str, interruptible: bool, instances: int, study: bool = False
) -> remote_store.StoreConfig | None:
    """The configured store when the launch needs one (DevopsError naming the fix when there is none).

    `study`: the instances share one study, whose members' records and checkpoints meet in the store.
    """
    needs = []
    if study:
        needs.append(
            f"a study over {instances} instances meets only in the store"
            if instances > 1
            else "a study's members on an instance go to the store, which outlives it"
        )
    if sink == durability.STORE:
        needs.append("--sink store keeps the runs in the store")
    if interruptible:
        needs.append("--interruptible rents instances that can be stopped mid-run, resumed only from a store")
    if sink == durability.STORE and instances > 1 and not study:
        needs.append(f"{instances} instances meet only in the store")
    if not needs:
        return None
    with redact.guarded("read the store's configuration"):
        config = stores.load()
    if config is None:
        raise redact.BadInput(f"{'; '.join(needs)}, and no store is configured: {stores.NO_STORE_FIX}")
    if sink != durability.STORE:
        raise redact.BadInput(f"{needs[0]}: add --sink store")
    return config


def instance_store_env(config: remote_store.StoreConfig, path: pathlib.Path | None) -> dict[str, str]:
    """The environment an instance reaches the store with: the key of the store file `path`, which must name
    the same store as this machine's. That key goes to a rented machine: make it one that may only list,
    read and write the store's prefix (this machine's own key never leaves it)."""
    if path is None:
        raise redact.BadInput(
            "a launch whose runs go to the store needs --instance-store-file: a store file"
            " (chmod 600, as ~/.config/rl-harness/store.json) with a key for the instances,"
            " limited to the store's bucket and prefix"
        )
    with redact.guarded("read the instances' store file"):
        instance = stores.load({env_vars.STORE_FILE_ENV: str(path), "HOME": os.path.expanduser("~")})
    if (instance.url, instance.endpoint) != (config.url, config.endpoint):
        raise redact.BadInput(
            f"--instance-store-file names {instance.url} but the runs are read from {config.url};"
            " give both the same store"
        )
    id_name, key_name = stores.KEY_VARIABLES[instance.scheme]
    env = {env_vars.STORE_ENV: instance.url, id_name: instance.key_id, key_name: instance.key}
    if instance.endpoint:
        env[env_vars.STORE_ENDPOINT_ENV] = instance.endpoint
    return env


def ready_to_launch(estimate: float, *, budget: float | None, confirmed: bool, setup: bootstrap.Bootstrap) -> bool:
    """True when a launch may rent: `estimate` (dollars) within `budget`, `confirmed` (--yes; else it prints
    how), and every pinned commit pushed where the instances fetch it; DevopsError naming the fix otherwise."""
    if budget is not None and estimate > budget:
        raise redact.DevopsError(
            f"the estimate ${estimate:.2f} exceeds --budget ${budget:.2f}; "
            "lower --hours, the number of jobs or --max-dph, or raise the budget"
        )
    if not confirmed:
        print("nothing launched: add --yes to launch")
        return False
    for pin in (setup.repo, setup.library):
        if pin is not None:
            check_pushed(pin)
    return True
