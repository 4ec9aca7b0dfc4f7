"""bzlmod (Bazel 7+) module extension: the same `rl_python` repository rule as WORKSPACE."""

load(":python_repo.bzl", "rl_python")

def _rl_python_extension_impl(_module_ctx):
    rl_python(name = "rl_python", lock = Label("//:requirements_lock.txt"),
        cuda_lock = Label("//:requirements_lock_cuda.txt"),
        test_lock = Label("//:requirements_test_lock.txt"),
        devops_lock = Label("//:requirements_devops_lock.txt"))

rl_python_extension = module_extension(implementation = _rl_python_extension_impl)
