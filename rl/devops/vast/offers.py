"""Choosing machines: hard gates, then one documented score.

    from rl.devops.vast import offers

    gates = offers.Gates(num_gpus=1, min_reliability=0.98, min_cuda=12.1, disk_gb=40,
                         min_cpu_cores=8, max_dph=0.80, excluded_machines=frozenset({1234}))
    choice = offers.search(account, gates, quarantined={5678: "never booted"}, limit=200)
    choice.ranked[0].offer["id"], choice.ranked[0].score
    choice.summary()   # "57 offers, 9 pass the gates; rejected: 30 reliability, 18 max_dph"

Gates are hard: an offer that fails one is never rented, whatever its score.
They go to the server as a filter *and* are checked again here on every offer
returned (the server's filter is a convenience, not a guarantee). A missing
field fails its gate: an offer that does not state its reliability is not
assumed reliable.

Score (higher is better), the expected deep-learning work per dollar:

    score = reliability * dlperf / price

`dlperf` is vast.ai's DL-performance figure of the offer, `price` what we
would pay per hour: its `dph_total` *including the disk we rent*, or for an
interruptible rental (`Gates(interruptible=True)`) our bid, and `reliability` (0..1)
discounts machines likely to fail mid-run: a run lost at random wastes its
cost, so expected completed work per dollar scales with it. Ties: lower
price, then lower offer id (deterministic).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping

from rl.devops.vast import redact

# The CUDA that the locked CUDA torch is built with: the `# torch-cuda:` line of
# requirements_lock_cuda.txt, which every instance installs (tests/offers_test.py checks they agree).
LOCKED_TORCH_CUDA = 13.0
# Minimum Linux driver branch per CUDA major for minor-version compatibility, from NVIDIA's
# table "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version Ranges":
# https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
MIN_DRIVER_FOR_CUDA_MAJOR = {11: 450, 12: 525, 13: 580}
# An interruptible rental bids this much above the offer's lowest winning bid (`min_bid`), at most `max_dph`:
# a bid at the minimum is the first one outbid.
BID_MARGIN = 0.10


def min_driver_for(cuda: float) -> int:
    """The lowest NVIDIA driver branch that runs a CUDA `cuda` build (13.0 -> 580)."""
    major = int(cuda)
    if major not in MIN_DRIVER_FOR_CUDA_MAJOR:
        raise redact.DevopsError(
            f"no known minimum driver for CUDA {cuda}; add its row to "
            "offers.MIN_DRIVER_FOR_CUDA_MAJOR from NVIDIA's compatibility table"
        )
    return MIN_DRIVER_FOR_CUDA_MAJOR[major]


def _driver_branch(version: object) -> int | None:
    """ "580.65.06" -> 580; None when the offer does not state a readable driver version."""
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class Gates:
    """Hard requirements for an offer. `disk_gb` is also the disk rented (and priced)."""

    num_gpus: int = 1
    gpu_names: tuple[str, ...] = ()
    min_reliability: float = 0.98
    require_verified: bool = True
    min_cuda: float = LOCKED_TORCH_CUDA  # the host driver's CUDA (cuda_max_good) must run the locked torch
    disk_gb: float = 40.0
    min_cpu_cores: float = 8.0
    max_dph: float = 1.0  # the price cap, $/h per instance: on-demand price, or the bid when interruptible
    excluded_machines: frozenset[int] = frozenset()
    interruptible: bool = False  # bid offers: cheaper, and an instance may be stopped when outbid

    def __post_init__(self):
        problems = []
        if self.num_gpus < 1:
            problems.append(f"num_gpus={self.num_gpus} must be >= 1")
        if not 0.0 <= self.min_reliability <= 1.0:
            problems.append(f"min_reliability={self.min_reliability} must be within [0, 1]")
        for name in ("min_cuda", "disk_gb", "min_cpu_cores", "max_dph"):
            if getattr(self, name) <= 0:
                problems.append(f"{name}={getattr(self, name)} must be > 0")
        if problems:
            raise redact.DevopsError("bad offer gates: " + "; ".join(problems))

    def query(self, quarantined: Mapping[int, str]) -> dict:
        """The server-side filter (vast.ai query dict) equivalent to these gates."""
        query = {
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "external": {"eq": False},
            "num_gpus": {"eq": self.num_gpus},
            "reliability": {"gte": self.min_reliability},
            "cuda_max_good": {"gte": self.min_cuda},
            "disk_space": {"gte": self.disk_gb},
            "cpu_cores_effective": {"gte": self.min_cpu_cores},
        }
        query["min_bid" if self.interruptible else "dph_total"] = {"lte": self.max_dph}
        if self.require_verified:
            query["verified"] = {"eq": True}
        if self.gpu_names:
            query["gpu_name"] = {"in": list(self.gpu_names)}
        excluded = sorted(set(self.excluded_machines) | set(quarantined))
        if excluded:
            query["machine_id"] = {"notin": excluded}
        return query

    def failures(self, offer: Mapping, quarantined: Mapping[int, str]) -> list[tuple[str, str]]:
        """[(gate, why)] for every gate `offer` fails; empty when it passes them all."""
        failed = []

        def at_least(gate: str, field: str, minimum: float) -> None:
            value = offer.get(field)
            if not isinstance(value, (int, float)) or value < minimum:
                failed.append((gate, f"{field}={value!r} < {minimum}"))

        def equals(gate: str, field: str, wanted: object) -> None:
            if offer.get(field) != wanted:
                failed.append((gate, f"{field}={offer.get(field)!r} != {wanted!r}"))

        equals("rentable", "rentable", True)
        if offer.get("rented"):
            failed.append(("rentable", "rented=True"))
        equals("num_gpus", "num_gpus", self.num_gpus)
        if self.gpu_names and offer.get("gpu_name") not in self.gpu_names:
            failed.append(("gpu_name", f"gpu_name={offer.get('gpu_name')!r} not in {list(self.gpu_names)}"))
        at_least("min_reliability", "reliability", self.min_reliability)
        if self.require_verified:
            equals("verified", "verified", True)
        at_least("min_cuda", "cuda_max_good", self.min_cuda)
        branch, needed = _driver_branch(offer.get("driver_version")), min_driver_for(self.min_cuda)
        if branch is None or branch < needed:
            failed.append(
                (
                    "driver",
                    (
                        f"driver_version={offer.get('driver_version')!r}: CUDA {self.min_cuda:g} "
                        f"needs driver >= {needed}"
                    ),
                )
            )
        at_least("disk_gb", "disk_space", self.disk_gb)
        at_least("min_cpu_cores", "cpu_cores_effective", self.min_cpu_cores)
        field = "min_bid" if self.interruptible else "dph_total"
        price = offer.get(field)
        if not isinstance(price, (int, float)) or not 0 < price <= self.max_dph:
            failed.append(("max_dph", f"{field}={price!r} not in (0, {self.max_dph}]"))
        if not isinstance(offer.get("dlperf"), (int, float)) or offer["dlperf"] <= 0:
            failed.append(("scorable", f"dlperf={offer.get('dlperf')!r} cannot be scored"))
        machine = offer.get("machine_id")
        if not isinstance(machine, int):
            failed.append(("machine_id", f"machine_id={machine!r}: cannot be excluded or quarantined"))
        if machine in self.excluded_machines:
            failed.append(("excluded", f"machine {machine} is excluded"))
        if machine in quarantined:
            failed.append(("quarantined", f"machine {machine}: {quarantined[machine]}"))
        return failed

    def price(self, offer: Mapping) -> float:
        """$/h we would pay for `offer` (one that passes the gates): its price, or our bid when interruptible."""
        if self.interruptible:
            return round(min(self.max_dph, offer["min_bid"] * (1 + BID_MARGIN)), 4)
        return offer["dph_total"]

    def offer_type(self) -> str:
        """The offer kind searched for (vast.ai's search `type`)."""
        return "bid" if self.interruptible else "on-demand"


def score(offer: Mapping, price: float) -> float:
    """reliability * dlperf / price (see the module docstring); only for offers that pass the gates."""
    return offer["reliability"] * offer["dlperf"] / price


@dataclasses.dataclass(frozen=True)
class ScoredOffer:
    offer: dict
    score: float
    price: float  # $/h this rental would bill (Gates.price)


@dataclasses.dataclass(frozen=True)
class Choice:
    """Offers that pass the gates, best first, and how many each gate rejected."""

    ranked: list[ScoredOffer]
    rejected: dict[str, int]
    seen: int

    def summary(self) -> str:
        rejected = ", ".join(f"{count} {gate}" for gate, count in sorted(self.rejected.items(), key=lambda kv: -kv[1]))
        return f"{self.seen} offers, {len(self.ranked)} pass the gates" + (
            f"; rejected: {rejected}" if rejected else ""
        )


def rank(candidates: list[dict], gates: Gates, quarantined: Mapping[int, str]) -> Choice:
    """Applies the gates to `candidates` and orders the survivors by score (ties: price, then id)."""
    rejected: collections.Counter[str] = collections.Counter()
    passing = []
    for offer in candidates:
        failures = gates.failures(offer, quarantined)
        if failures:
            rejected.update({gate for gate, _ in failures})
        else:
            price = gates.price(offer)
            passing.append(ScoredOffer(offer=offer, score=score(offer, price), price=price))
    passing.sort(key=lambda scored: (-scored.score, scored.price, scored.offer["id"]))
    return Choice(ranked=passing, rejected=dict(rejected), seen=len(candidates))


def search(account, gates: Gates, quarantined: Mapping[int, str], *, limit: int = 200) -> Choice:
    """Searches the account's offers with the gates as a filter, then gates and ranks them here.

    `account` is an `api.VastAccount`. The server is asked for the `limit` best
    offers by its own value-for-money order (`dlperf_per_dphtotal`), which is
    close to our score, so the best-scoring offers are within the page. On-demand
    offers unless `gates.interruptible`: an interruptible (bid) instance can be
    stopped mid-run, so only a launch whose runs resume from a store rents them.
    """
    candidates = account.search_offers(
        gates.query(quarantined),
        order="dlperf_per_dphtotal-",
        limit=limit,
        disk_gb=gates.disk_gb,
        offer_type=gates.offer_type(),
    )
    return rank(candidates, gates, quarantined)
