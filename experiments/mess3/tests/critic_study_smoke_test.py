"""Slow: `critic_study --smoke` runs every member (3 agents x 10 seeds) at its smoke budget through the study
command, summarises them, and its probes name the encoder they read (about 10-20 minutes on 2 cores)."""

import json

from experiments.common import smoke
from experiments.mess3 import critic_study
from rl.analysis.probes import PROCESS_ROLLOUTS, UNIFORM_CONTEXTS

LAYERS = ["residual_0", "residual_1", "residual_2"]
CRITIC_LAYERS = [f"critic_encoder/{layer}" for layer in LAYERS]
# The layers each agent's probes read: the separate critic's own encoder too, under its name.
PROBED = {"reward_only": LAYERS, "separate_critic": LAYERS + CRITIC_LAYERS, "ppg": LAYERS}


def test_the_critic_study_smoke_runs_every_member_and_names_the_encoders(tmp_path):
    study = smoke.run_study_smoke("experiments/mess3/critic_study", "experiments.mess3.critic_study", tmp_path)

    members = study.record["members"]
    assert sorted((member["agent"], member["seed"]) for member in members) == sorted(
        (agent, seed) for agent in critic_study.STUDY.agents for seed in critic_study.STUDY.seeds
    )
    assert {member["status"] for member in members} == {"completed"}
    for member in members:
        run_dir = study.member_results_dir(member["runs"][-1])
        manifest = json.loads((run_dir / "run_manifest.json").read_text())
        assert manifest["experiment"]["module"] == critic_study.STUDY.agents[member["agent"]]
        report = json.loads((run_dir / "probe_report.json").read_text())
        for kind in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS):
            layers = [layer["layer"] for layer in report["checkpoints"][-1]["reports"][kind]["layers"]]
            assert layers == PROBED[member["agent"]], (member["agent"], kind)
    # Every score, the critic encoder's R^2 included, has a value for every seed of every agent, and each pair too.
    summary = study.summary
    assert summary["not_completed"] == [] and summary["unreported_scores"] == []
    assert summary["completed"] == summary["members"] == len(members)
    for agent in critic_study.STUDY.agents:
        for score in critic_study.STUDY.scores:
            assert summary["agents"][agent]["scores"][score.name]["n"] == len(critic_study.STUDY.seeds), (agent, score)
    assert set(summary["pairs"]) == {"separate_critic - reward_only", "ppg - reward_only"}
    # Shared encoders: both roles read the same layers; the separate critic's roles read two encoders.
    for agent, same in (("reward_only", True), ("ppg", True), ("separate_critic", False)):
        scores = summary["agents"][agent]["scores"]
        policy, critic = (
            scores[f"R^2 block 1, uniform contexts, {role} encoder (trained)"]["mean"] for role in ("policy", "critic")
        )
        assert (policy == critic) == same, agent
    assert "critic encoder" in (study.folder / "summary.md").read_text()
