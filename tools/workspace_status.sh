#!/usr/bin/env bash
# Bazel workspace status: STABLE_ keys end up in binaries built with --stamp.
# Run outputs (every results/ and artifacts/ folder) are not inputs, so they do not make the
# tree dirty: the same rule as rl/harness/run/provenance.py's OUTPUT_FOLDERS.
set -u
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
changes=$(git status --porcelain -- . ':(exclude,glob)**/results/**' ':(exclude,glob)**/artifacts/**' 2>/dev/null)
if [ -n "$changes" ]; then dirty=true; else dirty=false; fi
echo "STABLE_GIT_COMMIT ${commit}"
echo "STABLE_GIT_DIRTY ${dirty}"
