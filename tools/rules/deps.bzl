"""WORKSPACE set-up (Bazel 4.2.3): offline stand-ins plus the Python toolchain repository.

WORKSPACE files cannot call `native` rules directly in Bazel 4, so they live
here. A dependent workspace (experiments_template/) calls the same macro.
"""

load(":python_repo.bzl", "rl_python")
load(":standins.bzl", "STANDIN_FILES", "standin_repository")

def rl_dependencies():
    for name in STANDIN_FILES:
        if name not in native.existing_rules():
            standin_repository(name = name, standin = name)
    rl_python(name = "rl_python", lock = Label("//:requirements_lock.txt"),
        cuda_lock = Label("//:requirements_lock_cuda.txt"),
        test_lock = Label("//:requirements_test_lock.txt"),
        devops_lock = Label("//:requirements_devops_lock.txt"))
