"""Prints a JSON identity of the running interpreter (run by the rl_python repository rule).

Standard library only: it runs before any virtualenv exists.
"""

import hashlib
import json
import os
import sys
import sysconfig


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def libpython_path():
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None  # statically linked: the executable's hash covers it
    name = sysconfig.get_config_var("LDLIBRARY")
    for folder in (sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LIBPL")):
        if folder and name and os.path.exists(os.path.join(folder, name)):
            return os.path.realpath(os.path.join(folder, name))
    return None


def main():
    executable = os.path.realpath(sys.executable)
    libpython = libpython_path()
    lock_path = sys.argv[1]
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401  (Debian splits it into python3-venv)

        has_venv = True
    except ImportError:
        has_venv = False
    print(
        json.dumps(
            {
                "version": "%d.%d.%d" % sys.version_info[:3],
                "implementation": sys.implementation.name,
                "executable": executable,
                "executable_sha256": sha256_of(executable),
                "libpython": libpython,
                "libpython_sha256": sha256_of(libpython) if libpython else None,
                "lock_sha256": sha256_of(lock_path),
                "has_venv": has_venv,
            },
            sort_keys=True,
        )
    )


main()
