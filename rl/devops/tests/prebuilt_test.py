"""The prebuilt environment: a real venv packed, moved and unpacked; a real S3-compatible server (moto's) as the
store; the real onstart script on fake instances (local processes) whose build is the rl_python rule's own
venv step (tools/rules/venv_cache.py: `python -m venv`, pip from a local wheel) and whose run is a real harness run."""

import base64
import datetime
import hashlib
import http.server
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
import zipfile

import pytest

from rl.devops.vast import bootstrap, prebuilt
from rl.devops.vast.testing import repos
from rl.harness import env_vars
from rl.harness.remote import stores

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
REMOTE = "https://git.example.com/"
RECIPE_ITERATIONS = 5


def _store():
    return stores.open_store(stores.load())


def test_the_variables_it_reads_before_any_venv_are_the_harness_s():
    assert (prebuilt.STORE_ENV, prebuilt.STORE_ENDPOINT_ENV) == (env_vars.STORE_ENV, env_vars.STORE_ENDPOINT_ENV)
    assert prebuilt.KEY_VARIABLES == stores.KEY_VARIABLES


def _venv(folder: pathlib.Path, *options: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", *options, str(folder)], check=True, capture_output=True, timeout=120)


def test_an_unpacked_venv_works_from_another_folder_once_its_own_is_gone(tmp_path):
    built = tmp_path / "instance1" / "venvs" / "requirements_lock_cuda-0123"
    _venv(built)
    tarball = tmp_path / "venv.tar"
    sha256, size = prebuilt.pack(built, tarball)
    assert (sha256, size) == (hashlib.sha256(tarball.read_bytes()).hexdigest(), tarball.stat().st_size)
    shutil.rmtree(tmp_path / "instance1")  # nothing of the packed folder is left to fall back on
    moved = tmp_path / "instance2" / "venvs" / "requirements_lock_cuda-0123"
    moved.parent.mkdir(parents=True)
    with open(tarball, "rb") as source:
        prebuilt.extract(source, tmp_path / "staging")
    prebuilt.install(tmp_path / "staging", moved, str(built))
    # pip is a console script: its shebang names the venv's folder, rewritten to the one it is unpacked in.
    pip = subprocess.run([str(moved / "bin" / "pip"), "--version"], capture_output=True, text=True, check=True)
    assert f"from {moved}/lib/" in pip.stdout
    assert str(built) not in (moved / "bin" / "activate").read_text() + (moved / "pyvenv.cfg").read_text()
    assert (moved / prebuilt.COMPLETE_MARKER).is_file() and not (tmp_path / "staging").exists()


def test_an_instance_given_no_readable_store_builds_and_publishes_nothing(tmp_path, monkeypatch, capsys):
    """The B2 sink's instances get a launch key that may not read, under B2's own variables: no store to reuse."""
    for name in env_vars.STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(env_vars.B2_KEY_ID_ENV, "0051234567890abcdef")
    monkeypatch.setenv(env_vars.B2_KEY_ENV, "K005" + "launch-key" * 3)
    lock = tmp_path / bootstrap.CUDA_LOCK_FILE
    lock.write_text("")
    arguments = ["--library", str(REPO_ROOT), "--lock", str(lock), "--cache-root", str(tmp_path / "venvs")]
    assert prebuilt.main(["fetch", *arguments]) == prebuilt.BUILD_WITHOUT_STORE
    assert capsys.readouterr().out == f"{prebuilt.LINE} no store is configured (${env_vars.STORE_ENV}); building it\n"


# ---- the store: read without a venv, published with the harness's clients ---------------------------------------


def test_a_signed_get_reads_the_store_and_names_what_is_missing_without_the_key(store_env, server):
    reader = prebuilt.StoreReader(os.environ)
    _store().put_bytes(b"hello", f"{reader.prefix}/prebuilt/x/{prebuilt.POINTER}")
    with reader.open(f"{reader.prefix}/prebuilt/x/{prebuilt.POINTER}") as response:
        assert response.read() == b"hello"
    with pytest.raises(prebuilt.Unavailable, match="none in the store"), reader.open(f"{reader.prefix}/absent"):
        pass
    wrong = prebuilt.StoreReader({**store_env, env_vars.S3_KEY_ENV: "wrong-" + server.read_write[1]})
    with pytest.raises(prebuilt.Unavailable, match="HTTP 403") as refused, wrong.open(f"{reader.prefix}/prebuilt"):
        pass
    assert server.read_write[1] not in str(refused.value)


class _FakeB2(http.server.BaseHTTPRequestHandler):
    """B2's authorize and download-by-name endpoints, as documented (b2_authorize_account v3)."""

    key_id, key, token, objects = "0051234567890abcdef", "K005" + "s3cr3t" * 4, "4_auth-token", {}

    def do_GET(self):
        basic = base64.b64encode(f"{self.key_id}:{self.key}".encode()).decode()
        if self.path == "/b2api/v3/b2_authorize_account" and self.headers["Authorization"] == f"Basic {basic}":
            url = f"http://127.0.0.1:{self.server.server_port}"
            body = {"authorizationToken": self.token, "apiInfo": {"storageApi": {"downloadUrl": url}}}
            return self._send(200, json.dumps(body).encode())
        if self.path.startswith("/file/") and self.headers["Authorization"] == self.token:
            found = self.objects.get(self.path)
            return self._send(200, found) if found is not None else self._send(404, b"{}")
        return self._send(401, b"{}")

    def _send(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_b2_store_is_read_through_b2s_download_api(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeB2)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(
            prebuilt, "B2_AUTHORIZE_URL", f"http://127.0.0.1:{server.server_port}/b2api/v3/b2_authorize_account"
        )
        _FakeB2.objects["/file/lab-runs/rl-harness/prebuilt/x/environment.json"] = b'{"a": 1}'
        environ = {
            env_vars.STORE_ENV: "b2://lab-runs/rl-harness",
            env_vars.B2_KEY_ID_ENV: _FakeB2.key_id,
            env_vars.B2_KEY_ENV: _FakeB2.key,
        }
        reader = prebuilt.StoreReader(environ)
        with reader.open("rl-harness/prebuilt/x/environment.json") as response:
            assert json.load(response) == {"a": 1}
        with pytest.raises(prebuilt.Unavailable, match="none in the store"), reader.open("rl-harness/absent"):
            pass
        wrong = prebuilt.StoreReader({**environ, env_vars.B2_KEY_ENV: "K005" + "wrong" * 5})
        with (
            pytest.raises(prebuilt.Unavailable, match="HTTP 401"),
            wrong.open("rl-harness/prebuilt/x/environment.json"),
        ):
            pass
    finally:
        server.shutdown()


def test_two_publishers_at_once_leave_a_pointer_to_a_complete_tarball_and_a_third_puts_nothing(store_env, tmp_path):
    folder = tmp_path / "venvs" / "requirements_lock_cuda-0123"
    _venv(folder, "--without-pip")
    (folder / prebuilt.COMPLETE_MARKER).write_text("built\n")
    lines, barrier = [], threading.Barrier(2)

    def publish():
        barrier.wait()
        lines.append(prebuilt.publish("requirements_lock_cuda-0123", folder, _store(), replace=True))

    threads = [threading.Thread(target=publish) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all("published" in line for line in lines) and len(lines) == 2
    # Whichever pointer won names a tarball that is whole: a reader unpacks it.
    destination = tmp_path / "elsewhere" / folder.name
    line = prebuilt.fetch(folder.name, destination, prebuilt.StoreReader(os.environ))
    assert line.startswith(f"{prebuilt.LINE} unpacked") and (destination / prebuilt.COMPLETE_MARKER).is_file()
    assert "already holds" in prebuilt.publish(folder.name, folder, _store())


@pytest.mark.parametrize("streaming", [True, False], ids=["extracted-while-downloaded", "verified-first"])
def test_a_whole_tarball_that_is_not_its_pointers_is_refused_and_nothing_is_left(
    store_env, tmp_path, monkeypatch, streaming
):
    monkeypatch.setattr(prebuilt, "STREAMING", streaming and prebuilt.STREAMING)
    folder = tmp_path / "built" / "requirements_lock_cuda-0123"
    _venv(folder, "--without-pip")
    (folder / prebuilt.COMPLETE_MARKER).write_text("built\n")
    store = _store()
    prebuilt.publish(folder.name, folder, store)
    reader = prebuilt.StoreReader(os.environ)
    assert prebuilt.fetch(folder.name, tmp_path / "good" / folder.name, reader).startswith(f"{prebuilt.LINE} unpacked")
    (tarball,) = [key for key in store.list_keys(f"{store.config.prefix}/prebuilt") if key.endswith(".tar")]
    (folder / "planted").write_text("not what the pointer names\n")
    prebuilt.pack(folder, tmp_path / "other.tar")  # a valid tarball: it extracts completely before the check
    store.put_file(str(tmp_path / "other.tar"), tarball, "", (tmp_path / "other.tar").stat().st_size)
    with pytest.raises(prebuilt.Corrupt, match="is corrupt"):
        prebuilt.fetch(folder.name, tmp_path / "bad" / folder.name, reader)
    assert list((tmp_path / "bad").iterdir()) == []  # no venv, no staging folder, no download


# ---- end to end: instances that build, reuse, and refuse a corrupt tarball ----------------------------------------


def _runtime_site_packages() -> str:
    """The runtime venv's packages: the run adds them to the path of the venv the instance built or unpacked, so
    that venv's python runs the harness as the CUDA lock's would (the runtime venv's python is in identity.json)."""
    python = json.loads(pathlib.Path(os.environ["RL_RUNTIME_IDENTITY_FILE"]).read_text())["venv_python"]
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _wheel(folder: pathlib.Path) -> pathlib.Path:
    """A wheel with a console script (`rlh-probe`, printing its python's prefix): what pip installs from the
    lock, offline."""
    files = {
        "rlh_probe/__init__.py": "import sys\n\n\ndef main():\n    print(sys.prefix)\n",
        "rlh_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: rlh-probe\nVersion: 1.0\n",
        "rlh_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "rlh_probe-1.0.dist-info/entry_points.txt": "[console_scripts]\nrlh-probe = rlh_probe:main\n",
    }

    def record_line(name, text):
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        return f"{name},sha256={digest},{len(text.encode())}"

    record = "\n".join([*(record_line(n, t) for n, t in files.items()), "rlh_probe-1.0.dist-info/RECORD,,"]) + "\n"
    path = folder / "rlh_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {**files, "rlh_probe-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return path


# Stands in for `bazel run --repo_env=RL_PYTHON_LOCK=cuda <target> -- <args>`: the rl_python rule's venv step and
# identity.json, the build identity action (tools/build_info/compute.py), then the run with the venv's python.
# The venv is built without the test's PYTHONPATH (the runtime venv's packages), as Bazel builds it.
_BAZEL_STUB = """#!/bin/bash
set -euo pipefail
lock="$PWD/requirements_lock_cuda.txt"
identity=$(python3.11 tools/rules/probe_interpreter.py "$lock")
python=$(env -u PYTHONPATH python3.11 tools/rules/venv_cache.py --lock "$lock" --cache-root "$RL_PYTHON_VENV_CACHE" \\
  --identity "$identity" 2>>"$HOME/venv_cache.log")
python3.11 -c 'import json, sys
identity = json.loads(sys.argv[1]); identity.pop("has_venv")
identity.update(bazel_version="stub", python_minor_pin="3.11", venv_python=sys.argv[2], lock="requirements_lock_cuda.txt")
print(json.dumps(identity))' "$identity" "$python" >"$HOME/identity.json"
printf 'BUILD\\t%s\\n' "$PWD/BUILD" >"$HOME/sources"
python3.11 tools/build_info/compute.py --output "$HOME/build_info.json" --target //experiments/x:y \\
  --manifest "$HOME/sources" --identity "$HOME/identity.json" --lock "$lock"
"$(dirname "$python")/rlh-probe" >"$HOME/probe.txt"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
RL_BUILD_INFO="$HOME/build_info.json" exec "$python" -m rl.harness.commands.cli rl.harness.tests.fake_recipe "$@"
"""


@pytest.fixture
def library(tmp_path):
    """The pinned checkout an instance builds: this library's tools and packages (symlinks), and a lock whose
    one package is a local wheel."""
    source = tmp_path / "git" / "library"
    source.mkdir(parents=True)
    for name in ("rl", "tools"):
        (source / name).symlink_to(REPO_ROOT / name)
    wheel = _wheel(tmp_path / "git")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (source / bootstrap.CUDA_LOCK_FILE).write_text(f"rlh-probe @ {wheel.as_uri()} --hash=sha256:{digest}\n")
    (source / "BUILD").write_text("# experiment\n")
    repos.git("init", "-q", cwd=source)
    repos.git("add", ".", cwd=source)
    repos.git("commit", "-q", "-m", "library", cwd=source)
    return bootstrap.GitPin(REMOTE + "library", repos.git("rev-parse", "HEAD", cwd=source))


def _instance(tmp_path, name, pin, store_env):
    """Runs the onstart script as instance `name` (a folder of its own); returns (its folder, its log, seconds from
    the script's start to the run's first training row)."""
    folder = tmp_path / name
    stubs = folder / "stubs"
    stubs.mkdir(parents=True)
    (stubs / "bazel").write_text(_BAZEL_STUB)
    (stubs / "apt-get").write_text("#!/bin/sh\necho 'apt-get must not run' >&2\nexit 9\n")
    for tool in ("rsync", "zip", "curl"):
        if shutil.which(tool) is None:
            (stubs / tool).write_text("#!/bin/sh\nexit 0\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    plan = bootstrap.Bootstrap(repo=pin, workdir=str(folder / "work"), upload_artifacts=True, max_hours=1.0)
    job = bootstrap.Job(target="//experiments/x:y", seed=0, run_id=f"20261206T120000Z-ab12cd-{name[-1]}00")
    script = folder / "onstart.sh"
    script.write_text(bootstrap.render(plan, job))
    env = {
        **store_env,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(folder),
        "PYTHONPATH": f"{REPO_ROOT}:{_runtime_site_packages()}",
        "OMP_NUM_THREADS": "1",
        "FAKE_RECIPE_ITERATIONS": str(RECIPE_ITERATIONS),
        env_vars.MIRROR_INTERVAL_ENV: "0.2",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{tmp_path / 'git'}/.insteadOf",
        "GIT_CONFIG_VALUE_0": REMOTE,
    }
    started = time.time()
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300, check=False)
    log = (pathlib.Path(plan.out_dir()) / "vast" / job.run_id / "bootstrap.log").read_text() + result.stderr
    assert result.returncode == 0, log
    metrics = pathlib.Path(plan.out_dir()) / "artifacts" / job.run_id / "metrics.jsonl"
    first = json.loads(metrics.read_text().splitlines()[0])["harness/logged_at"]
    manifest = json.loads((pathlib.Path(plan.out_dir()) / "results" / job.run_id / "run_manifest.json").read_text())
    return folder, log, datetime.datetime.fromisoformat(first).timestamp() - started, manifest


def _lines(log):
    return [line for line in log.splitlines() if line.startswith(prebuilt.LINE)]


def _local_build_hash(tmp_path, pin_folder: pathlib.Path) -> str:
    """The build hash a local build of the same checkout records (this machine's interpreter, the same lock)."""
    spec = importlib.util.spec_from_file_location("compute", REPO_ROOT / "tools" / "build_info" / "compute.py")
    compute = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compute)
    lock = pin_folder / bootstrap.CUDA_LOCK_FILE
    identity = json.loads(
        subprocess.run(
            ["python3.11", str(REPO_ROOT / "tools/rules/probe_interpreter.py"), str(lock)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    identity["bazel_version"] = "stub"
    sources = compute.sources_hash([("BUILD", str(pin_folder / "BUILD"))])
    return compute.build_hash(identity, hashlib.sha256(lock.read_bytes()).hexdigest(), sources)


@pytest.mark.slow
def test_the_second_instance_unpacks_what_the_first_built_and_a_corrupt_one_is_rebuilt(
    tmp_path, library, store_env, capsys
):
    first, first_log, first_s, first_manifest = _instance(tmp_path, "instance1", library, store_env)
    assert "rl_python: building" in (first / "venv_cache.log").read_text()  # the venv step built it
    assert _lines(first_log)[0].endswith("none in the store; building it")
    assert any(line.startswith(f"{prebuilt.LINE} published requirements_lock_cuda-") for line in _lines(first_log))
    first_venv = pathlib.Path(json.loads((first / "identity.json").read_text())["venv_python"]).parent.parent
    shutil.rmtree(first)  # the second instance has nothing of the first but the store

    second, second_log, second_s, second_manifest = _instance(tmp_path, "instance2", library, store_env)
    assert (second / "venv_cache.log").read_text() == ""  # no build: venv_cache found the venv complete
    assert _lines(second_log)[0].startswith(f"{prebuilt.LINE} unpacked requirements_lock_cuda-")
    assert _lines(second_log)[0].endswith("; no build") and len(_lines(second_log)) == 1  # nothing published
    second_venv = pathlib.Path(json.loads((second / "identity.json").read_text())["venv_python"]).parent.parent
    assert second_venv != first_venv and str(second_venv).startswith(str(second))
    assert (second / "probe.txt").read_text().strip() == str(second_venv)  # its console script runs from there
    # The run's recorded build hash: the same on both instances and in a local build of the checkout.
    build_hash = first_manifest["build"]["build_hash"]
    assert second_manifest["build"]["build_hash"] == build_hash == _local_build_hash(tmp_path, tmp_path / "git/library")

    store = _store()
    (tarball,) = [key for key in store.list_keys(store.config.prefix + "/prebuilt") if key.endswith(".tar")]
    store.put_bytes(b"not a tarball", tarball)  # the object corrupted in the store
    third, third_log, third_s, _ = _instance(tmp_path, "instance3", library, store_env)
    warnings = [line for line in _lines(third_log) if "WARNING" in line]
    assert len(warnings) == 1 and warnings[0].endswith("refused; building it"), third_log
    assert "rl_python: building" in (third / "venv_cache.log").read_text()
    assert any(line.startswith(f"{prebuilt.LINE} published") for line in _lines(third_log))  # replaced
    (pointer,) = [key for key in store.list_keys(store.config.prefix + "/prebuilt") if key.endswith(prebuilt.POINTER)]
    name = pointer.split("/")[-2]  # the replacement is whole: a fourth instance would unpack it
    line = prebuilt.fetch(name, tmp_path / "instance4" / name, prebuilt.StoreReader(os.environ))
    assert line.startswith(f"{prebuilt.LINE} unpacked {name}")
    for log in (first_log, second_log, third_log):
        assert store_env[env_vars.S3_KEY_ENV] not in log and store_env[env_vars.S3_KEY_ID_ENV] not in log
    with capsys.disabled():
        print(
            f"\nrented to first training row: {first_s:.1f} s building, {second_s:.1f} s unpacked,"
            f" {third_s:.1f} s refusing a corrupt tarball and building"
        )
