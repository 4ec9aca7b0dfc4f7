"""Prints this binary's build identity: `bazel run //tools/build_info:print_build_info`."""

import json

from rl.harness.run import buildinfo

print(json.dumps(buildinfo.current().as_dict(), indent=2, sort_keys=True))
