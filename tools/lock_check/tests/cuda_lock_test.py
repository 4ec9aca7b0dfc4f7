"""The CUDA lock is complete and agrees with the CPU lock, checked on CPU without downloading a wheel.

tools/relock.py writes, into the CUDA lock's header, what torch and the packages only
that lock has require on Linux x86_64 (`# requires: torch -> triton==3.7.1`) and torch's
CUDA version (`# torch-cuda: 13.0`); this test parses both locks and checks every such
requirement is pinned, with hashes, at a version that satisfies it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

RUNFILES = pathlib.Path(os.environ.get("TEST_SRCDIR", "."), os.environ.get("TEST_WORKSPACE", "rl_harness"))

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_REQUIRES = re.compile(r"^# requires: (\S+) -> (.+)$")
_TORCH_CUDA = re.compile(r"^# torch-cuda: (\d+\.\d+)$")


@dataclasses.dataclass(frozen=True)
class Pin:
    version: str
    hashes: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Lock:
    pins: dict[str, Pin]
    requires: list[tuple[str, Requirement]]  # (package, what it requires)
    torch_cuda: str | None


def parse(text: str) -> Lock:
    """Reads `name==version \\` blocks with their `--hash` lines, and the header's records."""
    pins, requires, torch_cuda = {}, [], None
    name = version = None
    hashes: list[str] = []
    for line in text.splitlines():
        if match := _REQUIRES.match(line):
            requires.append((canonicalize_name(match[1]), Requirement(match[2])))
        elif match := _TORCH_CUDA.match(line):
            torch_cuda = match[1]
        elif match := _PIN.match(line):
            if name:
                pins[name] = Pin(version, tuple(hashes))
            name, version, hashes = canonicalize_name(match[1]), match[2], []
        hashes.extend(_HASH.findall(line))
    if name:
        pins[name] = Pin(version, tuple(hashes))
    return Lock(pins, requires, torch_cuda)


def problems(lock: Lock) -> list[str]:
    """What makes `lock` incomplete for a `pip install --require-hashes --no-deps`; empty when none."""
    found = [f"{name}=={pin.version} has no --hash" for name, pin in lock.pins.items() if not pin.hashes]
    for package, requirement in lock.requires:
        pin = lock.pins.get(canonicalize_name(requirement.name))
        if pin is None:
            found.append(f"{package} requires {requirement}, which the lock does not pin")
        elif not requirement.specifier.contains(Version(pin.version), prereleases=True):
            found.append(f"{package} requires {requirement}, but the lock pins {pin.version}")
    return found


CPU = parse((RUNFILES / "requirements_lock.txt").read_text())
CUDA = parse((RUNFILES / "requirements_lock_cuda.txt").read_text())


def test_every_requirement_of_cuda_torch_is_pinned_with_hashes():
    assert problems(CUDA) == []


def test_torch_and_its_nvidia_runtime_are_recorded():
    required_by_torch = {requirement.name for package, requirement in CUDA.requires if package == "torch"}
    assert {"triton", "cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13"} <= required_by_torch
    assert CUDA.pins["torch"].version == CPU.pins["torch"].version


def test_torch_cuda_version_is_the_locked_cuda_runtime():
    runtime = CUDA.pins["nvidia-cuda-runtime"].version
    assert CUDA.torch_cuda == ".".join(runtime.split(".")[:2])


def test_cuda_lock_takes_the_cpu_lock_versions_and_adds_only_the_cuda_runtime():
    shared = set(CPU.pins) & set(CUDA.pins)
    assert set(CPU.pins) <= set(CUDA.pins)
    assert {name for name in shared if CPU.pins[name].version != CUDA.pins[name].version} == set()
    added = set(CUDA.pins) - set(CPU.pins)
    required = {canonicalize_name(r.name) for _, r in CUDA.requires}
    assert added <= required, f"pinned but required by nothing recorded: {sorted(added - required)}"


def test_the_locks_carry_different_torch_builds():
    # The CPU lock leaves PyPI's Linux x86_64 (CUDA) wheels out; the CUDA lock takes only those.
    assert set(CPU.pins["torch"].hashes).isdisjoint(CUDA.pins["torch"].hashes)


def test_a_missing_pin_and_a_missing_hash_are_named():
    lock = parse(
        "# requires: torch -> triton==3.7.1\n# requires: torch -> sympy>=1.13\n"
        "sympy==1.12 \\\n    --hash=sha256:" + "a" * 64 + "\nfilelock==3.0\n"
    )
    assert problems(lock) == [
        "filelock==3.0 has no --hash",
        "torch requires triton==3.7.1, which the lock does not pin",
        "torch requires sympy>=1.13, but the lock pins 1.12",
    ]
    assert isinstance(lock.requires[0][1], Requirement)
