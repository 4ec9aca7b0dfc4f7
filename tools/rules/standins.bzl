"""Offline stand-ins for the repositories Bazel 4.2.3's WORKSPACE suffix would download.

The suffix fetches `rules_cc`, `rules_java` and `remote_coverage_tools` from
GitHub as soon as a test or C++ rule needs them; declaring these tiny
generated repositories under the same names first pre-empts the download (the
suffix uses `maybe`). They are generated rather than checked in, so a
dependent workspace (experiments_template/) gets them too. `bazel coverage`
is therefore unsupported offline.
"""

def _forwarders(rules):
    return "\n".join([
        "def %s(**kwargs):\n    native.%s(**kwargs)\n" % (rule, rule)
        for rule in rules
    ])

_UNSUPPORTED_COVERAGE = """#!/bin/sh
echo "bazel coverage is unsupported in offline builds (tools/rules/standins.bzl)" >&2
exit 1
"""

_COVERAGE_BUILD = """package(default_visibility = ["//visibility:public"])

sh_binary(name = "coverage_report_generator", srcs = ["unsupported.sh"])

sh_binary(name = "lcov_merger", srcs = ["unsupported.sh"])
"""

STANDIN_FILES = {
    "rules_cc": {
        "BUILD": "",
        "cc/BUILD": "",
        "cc/defs.bzl": _forwarders([
            "cc_binary",
            "cc_import",
            "cc_library",
            "cc_proto_library",
            "cc_test",
            "cc_toolchain",
            "cc_toolchain_suite",
            "objc_library",
        ]),
    },
    "rules_java": {
        "BUILD": "",
        "java/BUILD": "",
        "java/defs.bzl": _forwarders([
            "java_binary",
            "java_import",
            "java_library",
            "java_runtime",
            "java_test",
            "java_toolchain",
        ]),
    },
    "remote_coverage_tools": {
        "BUILD": _COVERAGE_BUILD,
        "unsupported.sh": _UNSUPPORTED_COVERAGE,
    },
}

def _standin_impl(rctx):
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    for path, content in STANDIN_FILES[rctx.attr.standin].items():
        rctx.file(path, content, executable = path.endswith(".sh"))

standin_repository = repository_rule(
    implementation = _standin_impl,
    attrs = {"standin": attr.string(mandatory = True, values = STANDIN_FILES.keys())},
)
