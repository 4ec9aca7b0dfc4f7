"""`rl_harness_library`: the rl-harness library at a pinned commit, or a local checkout.

    rl_harness_library(
        name = "rl_harness",
        remote = RL_HARNESS_REMOTE,   # a git URL (or a path) to clone from
        commit = RL_HARNESS_COMMIT,   # the pin: a full commit id
    )

Library development: `export RL_HARNESS_LOCAL_PATH=/path/to/rl-harness` builds
against that checkout as it is on disk (edits visible immediately); the
harness then records that checkout's commit and dirty flag at run time
instead of the pin.

Either way the repository gets LIBRARY_REVISION.json, which every binary's
build identity records (and so every run's provenance).
"""

_LOCAL_ENV = "RL_HARNESS_LOCAL_PATH"

def _git(rctx, directory, *args):
    result = rctx.execute(["git", "-C", str(directory)] + list(args))
    if result.return_code != 0:
        fail("rl_harness_library: `git %s` in %s failed: %s" % (" ".join(args), directory, result.stderr))
    return result.stdout.strip()

def _link_checkout(rctx, checkout):
    for entry in checkout.readdir():
        if entry.basename in (".git", "LIBRARY_REVISION.json") or entry.basename.startswith("bazel-"):
            continue
        rctx.symlink(entry, entry.basename)

def _rl_harness_library_impl(rctx):
    local = rctx.os.environ.get(_LOCAL_ENV, "")
    if local:
        checkout = rctx.path(local)
        if not checkout.get_child("WORKSPACE.bazel").exists:
            fail("rl_harness_library: %s=%s is not an rl-harness checkout (no WORKSPACE.bazel). " % (_LOCAL_ENV, local) +
                 "Fix: point it at the library's root folder, or unset it to use the pinned commit.")
        _link_checkout(rctx, checkout)

        # Its commit moves without Bazel noticing: the harness reads it at run time.
        revision = {"local_checkout": str(checkout)}
    else:
        if len(rctx.attr.commit) != 40:
            fail("rl_harness_library: commit must be a full 40-character commit id, got '%s'. " % rctx.attr.commit +
                 "Fix: set RL_HARNESS_COMMIT in library_pin.bzl to `git rev-parse HEAD` of the library.")
        clone = rctx.path("_clone")
        result = rctx.execute(["git", "clone", "--quiet", "--no-checkout", rctx.attr.remote, str(clone)], timeout = 600)
        if result.return_code != 0:
            fail("rl_harness_library: cannot clone %s: %s\nFix: check the remote, or set %s to a local checkout." % (
                rctx.attr.remote,
                result.stderr,
                _LOCAL_ENV,
            ))
        _git(rctx, clone, "checkout", "--quiet", rctx.attr.commit)
        _link_checkout(rctx, clone)
        revision = {"commit": _git(rctx, clone, "rev-parse", "HEAD"), "dirty": False, "remote": rctx.attr.remote}
    revision["pinned_commit"] = rctx.attr.commit
    rctx.file("LIBRARY_REVISION.json", json.encode(revision) + "\n")

rl_harness_library = repository_rule(
    implementation = _rl_harness_library_impl,
    attrs = {
        "remote": attr.string(mandatory = True),
        "commit": attr.string(mandatory = True),
    },
    environ = [_LOCAL_ENV],
)
