"""A tiny recipe whose numbers depend on torch's kernel dispatch (no RLlib): the cross-platform reproduce tests.

Each iteration sums 4096 float32 products with torch: ATen's vectorised reduction adds them in an
order set by the CPU capability it dispatched to (DEFAULT, AVX2, AVX512), so runs at two
`ATEN_CPU_CAPABILITY` levels differ in the last bits from the first row on, while each level
repeats itself. The score it returns is either stable (the last sum, with a wide interval: it
agrees across levels) or chaotic (`--set kernels/chaotic_score=true`: the last bits amplified by the
logistic map, with a narrow interval: it does not).
"""

import torch

from rl.harness.run.hyperparameters import Hyperparameters
from rl.harness.run.manifest import OwnLoopRunnerRecord

HYPERPARAMETERS = Hyperparameters({"kernels/chaotic_score": False})
ITERATIONS = 6
STEPS_PER_ITERATION = 100
SIZE = 4096
LOGISTIC_STEPS = 300  # enough to turn a difference of 1e-7 into one of order 1


def _logistic(start: float) -> float:
    value = start
    for _ in range(LOGISTIC_STEPS):
        value = 3.99 * value * (1.0 - value)
    return value


def run(context):
    context.recorder.record_runner(
        OwnLoopRunnerRecord(
            kind="own loop",
            details={"determinism": {"expected": True, "why": "one process, one torch thread, seeded data"}},
        )
    )
    seed = int(context.seeds.generator("kernels/data").integers(2**31))
    data = torch.randn(SIZE, generator=torch.Generator().manual_seed(seed))
    weights = torch.ones(SIZE)
    context.recorder.summarize("kernels/value")
    value = 0.0
    for iteration in range(1, ITERATIONS + 1):
        value = float((data * weights).sum())
        weights = weights + torch.tanh(data * (value / SIZE))
        context.recorder.log_metrics(
            {
                "training_iteration": iteration,
                "num_env_steps_sampled_lifetime": iteration * STEPS_PER_ITERATION,
                "kernels": {"value": value},
            }
        )
    if context.hyperparameters.get("kernels/chaotic_score"):
        score, half_width = _logistic(0.1 + 0.8 * (abs(value) % 1.0)), 0.01
    else:
        score, half_width = value, 0.5
    return {"score": {"mean": score, "low": score - half_width, "high": score + half_width}}
