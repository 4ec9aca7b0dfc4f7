"""Fake instance disks and a fake rsync, so the durability gate runs without SSH in tests.

    from rl.devops.vast.testing import fake_instance

    disks = fake_instance.FakeDisks(tmp_path / "instances")
    disks.finish_run(port=20001, run_id="r1", files={"results/r1/run_manifest.json": b"{}"})   # + SHA256SUMS
    rsync = fake_instance.FakeRsync(disks)              # a durability.CommandRunner
    sink = durability.CopyBack(dest=tmp_path / "dest", known_hosts_dir=tmp_path / "known_hosts.d", runner=rsync)
    rsync.failures[20001] = (23, "rsync error: some files could not be transferred")

Each instance is known by its SSH port (the fake API gives every instance its
own); its output folder is `root/<port>/`, laid out as the bootstrap leaves
`/workspace/rlh/out`: results/, artifacts/, vast/<run-id>/{SHA256SUMS,bootstrap.log}.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import shutil
import subprocess


class FakeDisks:
    def __init__(self, root: pathlib.Path):
        self.root = pathlib.Path(root)

    def out_dir(self, port: int) -> pathlib.Path:
        return self.root / str(port)

    def finish_run(self, *, port: int, run_id: str, files: dict[str, bytes], exit_code: int = 0) -> dict[str, str]:
        """Writes `files` (paths relative to the output folder), then, as the bootstrap's EXIT trap does,
        SHA256SUMS over every file under results/ and artifacts/; returns the sums."""
        out = self.out_dir(port)
        for relative, content in files.items():
            path = out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        sums = {
            path.relative_to(out).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for kind in ("results", "artifacts")
            for path in sorted((out / kind).rglob("*"))
            if path.is_file()
        }
        record = out / "vast" / run_id
        record.mkdir(parents=True, exist_ok=True)
        (record / "SHA256SUMS").write_text("".join(f"{digest}  {path}\n" for path, digest in sums.items()))
        (record / "bootstrap.log").write_text(f"RLH_DONE exit_code={exit_code} run_id={run_id}\n")
        return sums


class FakeRsync:
    """Runs CopyBack's rsync command against FakeDisks: copies `root/<port>/` into the destination."""

    def __init__(self, disks: FakeDisks):
        self.disks = disks
        self.calls: list[list[str]] = []
        self.failures: dict[int, tuple[int, str]] = {}

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        port = int(re.search(r"ssh -p (\d+)", argv[argv.index("-e") + 1]).group(1))
        if port in self.failures:
            code, stderr = self.failures[port]
            return subprocess.CompletedProcess(argv, code, "", stderr)
        source = self.disks.out_dir(port)
        if not source.is_dir():
            return subprocess.CompletedProcess(argv, 23, "", f'rsync: change_dir "{argv[-2]}" failed: No such file')
        skip_artifacts = "--exclude=/artifacts/" in argv

        def ignore(directory: str, names: list[str]) -> list[str]:
            return ["artifacts"] if skip_artifacts and pathlib.Path(directory) == source else []

        shutil.copytree(source, argv[-1], ignore=ignore, dirs_exist_ok=True)
        return subprocess.CompletedProcess(argv, 0, "", "")
