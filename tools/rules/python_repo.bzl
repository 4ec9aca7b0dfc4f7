"""Repository rule `rl_python`: the pinned interpreter, a hashed-lock venv, and its toolchain.

No rules_python (it cannot be fetched offline). The rule
  1. finds the interpreter: $RL_PYTHON, else `python<PYTHON_MINOR_VERSION>` on PATH;
  2. checks its version and records its identity (sha256 of the executable and
     libpython) together with the lock's name and sha256 in `identity.json`;
  3. finds or builds the virtualenv of the lock that $RL_PYTHON_LOCK selects (`cpu`, the
     default: //:requirements_lock.txt; `cuda`: //:requirements_lock_cuda.txt,
     set by `--config=cuda`) with `venv_cache.py`: one venv per interpreter x lock per
     machine, under $RL_PYTHON_VENV_CACHE (default ~/.cache/rl_harness/venvs), built with
     `pip install --require-hashes --no-deps` (byte-compiled at install time, so
     read-only sandboxes never recompile torch) and `pip check`ed. Every clone names the
     same interpreter path, so Bazel's disk cache serves one clone's results to another;
  4. registers the venv's python as the Python 3 toolchain;
  5. builds the test tools' venv from //:requirements_test_lock.txt the same way (servers that
     tests start as processes of their own, never imported by the library) and exports its
     python's path as `test_tools_python.txt`;
  6. builds the operator's tools' venv from //:requirements_devops_lock.txt (vastai, which only
     //rl/devops targets use) the same way and exports its python's path as `devops_python.txt`:
     an rl_py_binary or rl_py_test with `venv = "devops"` runs with it (tools/rules/defs.bzl).

The selected lock is exported as `@rl_python//:requirements_lock.txt` for the
build identity. It re-runs when a lock, this file, $RL_PYTHON, $RL_PYTHON_LOCK or the cache folder
change; after changing the interpreter on disk or deleting a cached venv, run
`bazel sync --configure` (docs/building.md).
"""

load(":python_pin.bzl", "PYTHON_MINOR_VERSION")

_ENV_INTERPRETER = "RL_PYTHON"

# Which lock the venv is built from; `--config=cuda` sets it with --repo_env (.bazelrc).
_ENV_LOCK = "RL_PYTHON_LOCK"
_LOCK_CHOICES = ("cpu", "cuda")

# Where venvs are kept, one per interpreter x lock, shared by every clone (tools/rules/venv_cache.py).
_ENV_VENV_CACHE = "RL_PYTHON_VENV_CACHE"

# pip reads these itself; declaring them makes Bazel redo the venv when they change.
_PIP_ENVIRON = ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"]

_BUILD_TEMPLATE = """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

package(default_visibility = ["//visibility:public"])

exports_files(["devops_python.txt", "identity.json", "requirements_lock.txt", "test_tools_python.txt"])

py_runtime(
    name = "py3_runtime",
    interpreter_path = "{python}",
    python_version = "PY3",
    stub_shebang = "#!{python}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":py3_runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
"""

def _fail_interpreter(message):
    fail(("rl_python: %s\nFix: install Python %s (e.g. `pyenv install %s` or " +
          "`apt-get install python%s python%s-venv`) and put `python%s` on PATH, " +
          "or set %s=/path/to/python%s, then rerun bazel.") % (
        message,
        PYTHON_MINOR_VERSION,
        PYTHON_MINOR_VERSION,
        PYTHON_MINOR_VERSION,
        PYTHON_MINOR_VERSION,
        PYTHON_MINOR_VERSION,
        _ENV_INTERPRETER,
        PYTHON_MINOR_VERSION,
    ))

def _find_interpreter(rctx):
    explicit = rctx.os.environ.get(_ENV_INTERPRETER, "")
    if explicit:
        path = rctx.path(explicit)
        if not path.exists:
            _fail_interpreter("%s=%s does not exist." % (_ENV_INTERPRETER, explicit))
        return path
    found = rctx.which("python" + PYTHON_MINOR_VERSION)
    if not found:
        _fail_interpreter("no `python%s` on PATH." % PYTHON_MINOR_VERSION)
    return found

def _bazel_version(rctx):
    version = native.bazel_version
    if version and version != "no_version":
        return version

    # Debian's build reports no version; its package knows it.
    result = rctx.execute(["dpkg-query", "-W", "-f=${Version}", "bazel-bootstrap"])
    if result.return_code == 0 and result.stdout.strip():
        return "debian-bazel-bootstrap-" + result.stdout.strip()
    return "unknown"

def _selected_lock(rctx):
    choice = rctx.os.environ.get(_ENV_LOCK, "") or "cpu"
    if choice not in _LOCK_CHOICES:
        fail("rl_python: %s=%s is not a lock; use one of %s (`--config=cuda` sets cuda)." % (
            _ENV_LOCK,
            choice,
            ", ".join(_LOCK_CHOICES),
        ))
    return rctx.path(rctx.attr.cuda_lock if choice == "cuda" else rctx.attr.lock)

def _venv_cache_root(rctx):
    explicit = rctx.os.environ.get(_ENV_VENV_CACHE, "")
    if explicit:
        return explicit
    xdg = rctx.os.environ.get("XDG_CACHE_HOME", "")
    if xdg:
        return xdg + "/rl_harness/venvs"
    home = rctx.os.environ.get("HOME", "")
    if not home:
        fail("rl_python: neither %s, XDG_CACHE_HOME nor HOME is set, so there is no folder for the venv.\n" % _ENV_VENV_CACHE +
             "Fix: set %s=/a/writable/folder (e.g. --repo_env=%s=/tmp/venvs)." % (_ENV_VENV_CACHE, _ENV_VENV_CACHE))
    return home + "/.cache/rl_harness/venvs"

def _probe(rctx, interpreter, lock):
    """probe_interpreter.py's identity of `interpreter` with `lock`: (decoded, as printed)."""
    probe = rctx.execute([interpreter, rctx.path(rctx.attr._probe), lock])
    if probe.return_code != 0:
        _fail_interpreter("`%s` could not run: %s" % (interpreter, probe.stderr))
    return json.decode(probe.stdout), probe.stdout

def _venv_python(rctx, lock, identity, printed, cache_root):
    """The python of `lock`'s venv under `cache_root`, built once per machine by venv_cache.py."""
    rctx.report_progress("venv for %s under %s (minutes, once per machine and lock)" % (lock.basename, cache_root))
    result = rctx.execute(
        [identity["executable"], rctx.path(rctx.attr._venv_cache), "--lock", lock,
         "--cache-root", cache_root, "--identity", printed],
        timeout = rctx.attr.install_timeout,
    )
    if result.return_code != 0:
        fail("%s\n%s" % (result.stderr, result.stdout))
    return result.stdout.strip()

def _rl_python_impl(rctx):
    interpreter = _find_interpreter(rctx)
    lock = _selected_lock(rctx)
    lock_name = lock.basename
    identity, printed = _probe(rctx, interpreter, lock)
    if not identity["version"].startswith(PYTHON_MINOR_VERSION + "."):
        _fail_interpreter("`%s` is Python %s, but the build pins %s." % (
            interpreter,
            identity["version"],
            PYTHON_MINOR_VERSION,
        ))
    if not identity["has_venv"]:
        _fail_interpreter("`%s` lacks the venv/ensurepip modules." % interpreter)

    cache_root = _venv_cache_root(rctx)
    python = _venv_python(rctx, lock, identity, printed, cache_root)

    # Tools that run in venvs of their own, never beside the library: servers that tests start as
    # processes (requirements_test_lock.txt) and the operator's vast.ai tools (requirements_devops_lock.txt).
    for side_lock, exported in [(rctx.attr.test_lock, "test_tools_python.txt"), (rctx.attr.devops_lock, "devops_python.txt")]:
        side_lock_path = rctx.path(side_lock)
        side_identity, side_printed = _probe(rctx, interpreter, side_lock_path)
        rctx.file(exported, _venv_python(rctx, side_lock_path, side_identity, side_printed, cache_root) + "\n")

    identity["bazel_version"] = _bazel_version(rctx)
    identity["python_minor_pin"] = PYTHON_MINOR_VERSION
    identity["venv_python"] = python
    identity["lock"] = lock_name
    identity.pop("has_venv")
    rctx.file("identity.json", json.encode_indent(identity, indent = "  ") + "\n")
    rctx.symlink(lock, "requirements_lock.txt")
    rctx.file("BUILD.bazel", _BUILD_TEMPLATE.format(python = python))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)

rl_python = repository_rule(
    implementation = _rl_python_impl,
    attrs = {
        "lock": attr.label(allow_single_file = True, mandatory = True, doc = "the default (CPU) lock"),
        "cuda_lock": attr.label(allow_single_file = True, mandatory = True, doc = "Linux x86_64 with CUDA torch"),
        "test_lock": attr.label(allow_single_file = True, mandatory = True, doc = "servers tests start (moto)"),
        "devops_lock": attr.label(allow_single_file = True, mandatory = True, doc = "the operator's tools (vastai)"),
        "install_timeout": attr.int(default = 3600),
        "_probe": attr.label(default = Label("//tools/rules:probe_interpreter.py")),
        "_venv_cache": attr.label(default = Label("//tools/rules:venv_cache.py")),
    },
    environ = [_ENV_INTERPRETER, _ENV_LOCK, _ENV_VENV_CACHE, "XDG_CACHE_HOME", "HOME"] + _PIP_ENVIRON,
    configure = True,
    doc = "Pinned Python interpreter + venv from the hashed lock, as the Python toolchain.",
)
