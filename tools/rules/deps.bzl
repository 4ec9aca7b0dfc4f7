"""WORKSPACE set-up (Bazel 4.2.3): offline stand-ins plus the Python toolchain repository.

WORKSPACE files cannot call `native` rules directly in Bazel 4, so they live here.
"""

load(":python_repo.bzl", "rl_python")

# Bazel 4's implicit WORKSPACE suffix fetches these from GitHub the moment a
# test or cc rule needs them; declaring in-repo stand-ins under the same names
# pre-empts the download (the suffix uses `maybe`).
_OFFLINE_STANDINS = {
    "rules_cc": "tools/stubs/rules_cc",
    "rules_java": "tools/stubs/rules_java",
    "remote_coverage_tools": "tools/stubs/remote_coverage_tools",
}

def rl_offline_standins():
    for name, path in _OFFLINE_STANDINS.items():
        if name not in native.existing_rules():
            native.local_repository(name = name, path = path)

def rl_dependencies():
    rl_offline_standins()
    rl_python(name = "rl_python", lock = "//:requirements_lock.txt")
