#!/usr/bin/env bash
# Bazel workspace status: STABLE_ keys end up in binaries built with --stamp.
set -u
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then dirty=true; else dirty=false; fi
echo "STABLE_GIT_COMMIT ${commit}"
echo "STABLE_GIT_DIRTY ${dirty}"
