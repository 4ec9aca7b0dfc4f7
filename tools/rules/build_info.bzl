"""`rl_build_info`: the build identity of a binary, as a JSON file in its runfiles.

build_hash = sha256 over
  * the interpreter identity and Bazel version (@rl_python//:identity.json),
  * the sha256 of the lock the venv was built from (@rl_python//:requirements_lock.txt:
    the CPU lock, or the CUDA one under --config=cuda),
  * the content of every first-party source in the binary's transitive closure
    (path and bytes, the pinned library's too in a dependent workspace), so
    editing an unrelated package leaves it unchanged.
"""

def _first_party_sources(ctx):
    # Third-party code lives in the venv (covered by the lock hash), so every Python
    # source Bazel sees is first-party: this repository's, or the library's when a
    # dependent workspace (experiments_template/) builds against a pinned rl_harness.
    transitive = [dep[PyInfo].transitive_sources for dep in ctx.attr.deps if PyInfo in dep]
    return depset(ctx.files.srcs, transitive = transitive).to_list()

def _rl_build_info_impl(ctx):
    sources = _first_party_sources(ctx)
    manifest = ctx.actions.declare_file(ctx.label.name + ".sources.txt")
    ctx.actions.write(manifest, "".join(["%s\t%s\n" % (f.short_path, f.path) for f in sources]))
    out = ctx.actions.declare_file(ctx.label.name + ".json")
    args = ctx.actions.args()
    args.add("--target", "//%s:%s" % (ctx.label.package, ctx.attr.binary or ctx.label.name))
    args.add("--manifest", manifest)
    args.add("--identity", ctx.file._identity)
    args.add("--lock", ctx.file._lock)
    args.add_all("--library-revision", ctx.files._library_revision)
    args.add("--output", out)
    ctx.actions.run(
        executable = ctx.executable._compute,
        arguments = [args],
        inputs = sources + [manifest, ctx.file._identity, ctx.file._lock] + ctx.files._library_revision,
        outputs = [out],
        mnemonic = "RlBuildInfo",
        progress_message = "Hashing build identity of %s" % ctx.label,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

rl_build_info = rule(
    implementation = _rl_build_info_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".py"]),
        "binary": attr.string(doc = "Name of the binary this identity describes (default: this target)."),
        "deps": attr.label_list(providers = [[PyInfo]]),
        "_compute": attr.label(
            default = Label("//tools/build_info:compute"),
            executable = True,
            cfg = "exec",
        ),
        "_identity": attr.label(default = Label("@rl_python//:identity.json"), allow_single_file = True),
        "_lock": attr.label(default = Label("@rl_python//:requirements_lock.txt"), allow_single_file = True),
        # Empty in this repository; holds the pin when a dependent workspace builds against it.
        "_library_revision": attr.label(default = Label("//:library_revision"), allow_files = True),
    },
    doc = "Writes <name>.json with the build hash of `srcs` + the transitive closure of `deps`.",
)

def _rl_stamp_info_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".json")
    ctx.actions.run(
        executable = ctx.executable._compute,
        arguments = ["--stamp-from", ctx.info_file.path, "--output", out.path],
        inputs = [ctx.info_file],
        outputs = [out],
        mnemonic = "RlStampInfo",
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

rl_stamp_info = rule(
    implementation = _rl_stamp_info_impl,
    attrs = {
        "_compute": attr.label(
            default = Label("//tools/build_info:compute"),
            executable = True,
            cfg = "exec",
        ),
    },
    doc = "Writes <name>.json with STABLE_GIT_COMMIT/STABLE_GIT_DIRTY (use only under --stamp).",
)
