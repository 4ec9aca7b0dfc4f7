#!/usr/bin/env bash
# ruff, pinned in requirements_test.in, over rl/, experiments/ and tools/ (ruff.toml):
#   tools/lint.sh          checks formatting and lint (CI runs this)
#   tools/lint.sh --fix    formats and applies ruff's safe fixes
# ruff comes from the test tools' venv, which Bazel's rl_python rule builds once per machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./bazelw build @rl_python//:test_tools_python.txt >/dev/null 2>&1 \
  || { echo "lint: building the test tools' venv failed; run ./bazelw build @rl_python//:test_tools_python.txt"; exit 1; }
python=$(cat "$(./bazelw info output_base 2>/dev/null)/external/rl_python/test_tools_python.txt")
ruff="$(dirname "$python")/ruff"
paths=(rl experiments tools)
if [[ "${1:-}" == "--fix" ]]; then
  "$ruff" check --fix --quiet "${paths[@]}" || true
  "$ruff" format --quiet "${paths[@]}"
  "$ruff" check "${paths[@]}"
else
  "$ruff" format --check --quiet "${paths[@]}" \
    || { echo "lint: files above are not formatted; run tools/lint.sh --fix"; exit 1; }
  "$ruff" check "${paths[@]}"
fi
