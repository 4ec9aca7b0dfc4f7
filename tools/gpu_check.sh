#!/usr/bin/env bash
# GPU check: builds the CUDA venv (--config=cuda), runs reward_only --smoke on the cuda
# hardware profile, asserts the learner ran on cuda, and prints env steps/s, learner samples/s and
# the peak GPU memory (nvidia-smi, sampled every second over the whole run, PPG's aux phase included).
# Needs a Linux x86_64 machine with an NVIDIA driver >= 580 (CUDA 13.0 torch; docs/building.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: no nvidia-smi here; run this on a GPU machine with the NVIDIA driver installed" >&2
  exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
results=$(mktemp -d)
peak_log="$results/gpu_memory_mib.txt"
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -l 1 >"$peak_log" &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT
./bazelw run --config=cuda //experiments/mess3:reward_only -- \
  --smoke --hardware-profile cuda --results-dir "$results"
kill "$sampler" 2>/dev/null || true
manifest=$(find "$results" -name run_manifest.json -print -quit)
if [ -z "$manifest" ]; then
  echo "gpu_check: FAILED: the run wrote no run_manifest.json under $results" >&2
  exit 1
fi
python3 - "$manifest" "$peak_log" <<'PY'
import json, pathlib, sys

manifest_path, peak_log = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
manifest = json.loads(manifest_path.read_text())


def find(tree, key):
    """Every value stored under `key` anywhere in the manifest (its layout may grow)."""
    if isinstance(tree, dict):
        for name, value in tree.items():
            if name == key:
                yield value
            yield from find(value, key)
    elif isinstance(tree, list):
        for value in tree:
            yield from find(value, key)


devices = set(find(manifest, "learner_device"))
if devices != {"cuda"}:
    sys.exit(f"gpu_check: FAILED: learner_device {sorted(devices)} in {manifest_path}, expected cuda")
print("learner_device: cuda;", "driver", next(find(manifest, "nvidia_driver_version"), "?"),
      "CUDA", next(find(manifest, "cuda_version"), "?"), "GPU", next(find(manifest, "gpu_model"), "?"))
print("torch determinism:", json.dumps(next(find(manifest, "torch_determinism"), None)))
# metrics.jsonl sits in the run's artifacts folder (manifest paths.artifacts); keys as the harness
# flattens RLlib 2.56's results (checked against a CPU run's metrics.jsonl).
metrics = pathlib.Path(manifest["paths"]["artifacts"]) / "metrics.jsonl"
rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
for label, key in (("env steps/s", "env_runners/num_env_steps_sampled_lifetime_throughput/throughput_since_last_reduce"),
                   ("learner samples/s", "learners/__all_modules__/num_module_steps_trained_throughput")):
    figures = [row[key] for row in rows if row.get(key)]
    print(f"{label}: {figures[-1]:.1f}" if figures else f"{label}: not in {metrics} (no {key!r})")
used = [int(line) for line in peak_log.read_text().split() if line.isdigit()]
print(f"peak GPU memory: {max(used) if used else '?'} MiB (nvidia-smi, whole run)")
PY
