"""The vast.ai account, through the `vastai` SDK, with redacted errors and bounded retries.

    from rl.devops.vast import api

    key = api.read_api_key()                     # $VAST_API_KEY or the key file; registered for redaction
    account = api.VastAccount(key)               # server_url="http://127.0.0.1:PORT" in tests
    offers = account.search_offers({"num_gpus": {"eq": 1}}, order="dph_total", limit=50, disk_gb=40)
    created = account.create_instance(offers[0]["id"], image="python:3.11-bookworm", disk_gb=40,
                                      label="rlh-ab12cd-0", onstart="#!/bin/bash ...", env={})
    instance_id = created.instance_id                # created.adopted: a failed attempt had made it
    account.instance(instance_id)["actual_status"]   # "loading", "running", ...; None once destroyed
    account.logs(instance_id, tail=200)
    account.destroy_instance(instance_id)

The SDK itself retries 429, 502-504 and transport timeouts (`retries` attempts,
honouring Retry-After). Reads and destroys are idempotent, so this wrapper also
retries them on any 5xx. Creating an instance is not: a 5xx or a timeout may
come after the instance was made, so a blind retry rents twice. Creates go
through a second SDK client with its retries off, and before each retry the
account is searched for the instance's label; an instance found there is
adopted instead of renting again (`CreateOutcomeUnknown` when that search
fails too). Every call runs inside `redact.guarded`, so no error carries the key.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import stat
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests
import vastai

from rl.devops.vast import redact

API_KEY_ENV = "VAST_API_KEY"
DEFAULT_KEY_FILE = pathlib.Path("~/.config/vastai/vast_api_key")

_T = TypeVar("_T")


def read_api_key(key_file: pathlib.Path | None = None) -> str:
    """The vast.ai API key from $VAST_API_KEY, else `key_file` (default ~/.config/vastai/vast_api_key).

    Never from the command line, where `ps` would show it. A key file other users may read or
    write is refused. The key is registered with `redact` before it is returned.
    """
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        path = (key_file or DEFAULT_KEY_FILE).expanduser()
        try:
            if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise redact.DevopsError(
                    f"the vast.ai key file {path} is open to other users (mode"
                    f" {stat.S_IMODE(path.stat().st_mode):o}); run `chmod 600 {path}`, and"
                    " replace the key at vast.ai if others could have read it"
                )
            key = path.read_text().strip()
        except OSError as error:
            raise redact.DevopsError(
                f"no vast.ai API key: ${API_KEY_ENV} is unset and {path} cannot be read "
                f"({type(error).__name__}); export {API_KEY_ENV} or write the key to that file "
                "(chmod 600)"
            ) from None
        if not key:
            raise redact.DevopsError(f"{path} is empty; write your vast.ai API key into it")
    redact.register_secret(key)
    return key


# Longest Retry-After a create waits out (the SDK's own cap).
_MAX_RETRY_AFTER_S = 60.0


class CreateOutcomeUnknown(redact.DevopsError):
    """A create failed and the account could not be searched for its label: an instance may exist."""


@dataclasses.dataclass(frozen=True)
class Created:
    instance_id: int
    attempts: int
    adopted: bool  # a failed attempt had made the instance; found by its label


def _status_code(error: Exception) -> int | None:
    response = getattr(error, "response", None) if isinstance(error, requests.HTTPError) else None
    return None if response is None else response.status_code


def _is_transient(error: Exception) -> bool:
    code = _status_code(error)
    if code is not None:
        return code >= 500
    return isinstance(error, (requests.ConnectionError, requests.Timeout))


def _create_may_succeed_later(error: Exception) -> bool:
    """A 429 (rate limited), a 5xx or a lost connection: worth retrying once the label is checked."""
    return _status_code(error) == 429 or _is_transient(error)


def _retry_after_s(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    try:
        return min(float(response.headers["Retry-After"]), _MAX_RETRY_AFTER_S)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


class VastAccount:
    """One vast.ai account. Arguments: the API key, the server (tests: the fake's URL), timeouts, retries."""

    def __init__(
        self,
        api_key: str,
        server_url: str | None = None,
        *,
        request_timeout_s: float = 60.0,
        retries: int = 3,
        retry_backoff_s: float = 1.0,
    ):
        if retries < 1:
            raise redact.DevopsError(f"retries={retries}: use at least 1 (one attempt, no retry)")
        redact.register_secret(api_key)
        self._sdk = vastai.VastAI(api_key=api_key, server_url=server_url, retry=retries, raw=True, quiet=True)
        # retry=1: one attempt. The SDK would resend a create after a 502 or a timeout that may have rented.
        self._create_sdk = vastai.VastAI(api_key=api_key, server_url=server_url, retry=1, raw=True, quiet=True)
        for sdk in (self._sdk, self._create_sdk):
            sdk.client.timeout = request_timeout_s
        self._retries = retries
        self._retry_backoff_s = retry_backoff_s

    def _call(self, what: str, function: Callable[[], _T], *, idempotent: bool) -> _T:
        attempts = self._retries if idempotent else 1
        with redact.guarded(what):
            for attempt in range(1, attempts + 1):
                try:
                    return function()
                except Exception as error:
                    if attempt == attempts or not _is_transient(error):
                        raise
                time.sleep(self._retry_backoff_s * attempt)
        raise AssertionError("unreachable: the loop returns or raises")

    def search_offers(
        self, query: dict, *, order: str, limit: int, disk_gb: float, offer_type: str = "on-demand"
    ) -> list[dict]:
        """Offers matching `query` (a parsed filter dict, no SDK defaults), priced for `disk_gb` of disk;
        `offer_type` "bid" for interruptible ones."""
        return self._call(
            "search offers",
            lambda: self._sdk.search_offers(
                query=query, type=offer_type, order=order, limit=limit, storage=disk_gb, no_default=True
            ),
            idempotent=True,
        )

    def create_instance(
        self,
        offer_id: int,
        *,
        image: str,
        disk_gb: float,
        label: str,
        onstart: str,
        env: dict[str, str],
        bid: float | None = None,
    ) -> Created:
        """Rents offer `offer_id` as instance `label` (unique per instance); never rents it twice.
        `bid` ($/h) rents it as an interruptible instance at that price.

        A transient failure (429, 5xx, timeout) is retried only after no
        instance with `label` was found; one found is adopted. Raises
        `CreateOutcomeUnknown` when the account cannot be searched, and a
        `DevopsError` when every attempt failed and no instance has the label.
        """
        what = f"create an instance from offer {offer_id}"
        for attempt in range(1, self._retries + 1):
            retryable, retry_after_s = False, None
            try:
                with redact.guarded(what):
                    try:
                        response = self._create_sdk.create_instance(
                            id=offer_id,
                            image=image,
                            disk=disk_gb,
                            label=label,
                            onstart_cmd=onstart,
                            env=env,
                            price=bid,
                            ssh=True,
                            direct=True,
                            cancel_unavail=True,
                        )
                    except Exception as error:
                        retryable, retry_after_s = _create_may_succeed_later(error), _retry_after_s(error)
                        raise
            except redact.DevopsError as failure:
                if not retryable:
                    raise
                existing = self._labelled(label, after=failure)
                if existing is not None:
                    return Created(existing, attempts=attempt, adopted=True)
                if attempt == self._retries:
                    raise redact.DevopsError(
                        f"{failure}; no instance has label {label}, so nothing was rented ({attempt} attempts)"
                    ) from None
                time.sleep(retry_after_s or self._retry_backoff_s * attempt)
                continue
            if not (isinstance(response, dict) and response.get("success") and response.get("new_contract")):
                raise redact.DevopsError(f"{what}: unexpected answer {response!r}")
            return Created(int(response["new_contract"]), attempts=attempt, adopted=False)
        raise AssertionError("unreachable: the loop returns or raises")

    def _labelled(self, label: str, *, after: redact.DevopsError) -> int | None:
        """The id of the instance labelled `label`, or None; `after` is the create error being checked."""
        try:
            rows = self.instances()
        except redact.DevopsError as error:
            raise CreateOutcomeUnknown(
                f"{after}; whether it rented an instance is unknown, the label check failed too ({error}): "
                "run `reap` once vast.ai answers, it adopts an instance with this label"
            ) from None
        return next((row["id"] for row in rows if row.get("label") == label), None)

    def instance(self, instance_id: int) -> dict | None:
        """The instance's row (actual_status, ssh_host, ssh_port, dph_total, ...), or None once it is gone."""
        return self._call(f"show instance {instance_id}", lambda: self._sdk.show_instance(instance_id), idempotent=True)

    def instances(self) -> list[dict]:
        """Every instance of the account (all pages)."""
        return self._call("list instances", self._sdk.show_instances, idempotent=True)

    def logs(self, instance_id: int, *, tail: int) -> str:
        """The last `tail` lines of the instance's container log, redacted."""
        text = self._call(
            f"logs of instance {instance_id}", lambda: self._sdk.logs(instance_id, tail=str(tail)), idempotent=True
        )
        return redact.redact(text if isinstance(text, str) else repr(text))

    def destroy_instance(self, instance_id: int) -> None:
        """Destroys the instance (irreversible: its disk goes with it). Callers gate this on durability."""
        self._call(f"destroy instance {instance_id}", lambda: self._sdk.destroy_instance(instance_id), idempotent=True)


def ssh_endpoint(row: dict[str, Any]) -> tuple[str, int]:
    """(host, port) of an instance's SSH server from its row, read the way the SDK's `ssh_url` reads it."""
    port = row.get("ssh_port") or ((row.get("ports") or {}).get("22/tcp") or [{}])[0].get("HostPort")
    host = row.get("ssh_host") or row.get("public_ipaddr")
    if not (host and port):
        raise redact.DevopsError(
            f"instance {row.get('id')} has no SSH endpoint yet (status {row.get('actual_status')!r}); "
            "wait until it is running"
        )
    return str(host), int(port)
