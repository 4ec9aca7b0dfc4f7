"""A recipe that probes its own checkpoints in-run without training (fast tests of stopping while probing).

Its checkpoints hold untrained tiny transformers; it probes them as the Mess3 recipes do after training.
"""

from rl.analysis import probing
from rl.analysis.checkpoints import from_context
from rl.analysis.tests import probe_recipe
from rl.analysis.tests.fake_runs import save_in_checkpoint
from rl.analysis.tests.tiny_modules import tiny_transformer

CHECKPOINTS = 3


def run(context):
    for iteration in range(1, CHECKPOINTS + 1):
        context.recorder.log_metrics(
            {"training_iteration": iteration, "num_env_steps_sampled_lifetime": 100 * iteration}
        )
        with context.recorder.checkpoint(iteration=iteration, env_steps=100 * iteration) as folder:
            save_in_checkpoint(tiny_transformer(iteration), folder)
    probed = probing.probe_checkpoints(
        from_context(context),
        probe_recipe.probe_plan(smoke=True),
        seed=probing.probe_seed(context.seeds),
        module_id="default_policy",
        show_progress=False,
    )
    return {"probed": len(probed)}
