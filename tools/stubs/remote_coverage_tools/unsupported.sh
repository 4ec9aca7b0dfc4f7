#!/bin/sh
echo "bazel coverage is unsupported in offline builds (tools/stubs/README.md)" >&2
exit 1
