"""A real RunContext with a started RunSession in a temporary folder, for in-process runner tests (no CLI)."""

from rl.harness.run import seeding, session
from rl.harness.run.context import RunContext
from rl.harness.run.layout import RunLayout
from rl.harness.run.machine import HardwareProfile, MachineFacts
from rl.harness.run.manifest import ExperimentRecord, RunManifest
from rl.harness.run.rows import RowBudget
from rl.harness.training import hardware


def machine_facts(cpus: int = 2, *, cuda: bool = False, mps: bool = False) -> MachineFacts:
    """A made-up machine with `cpus` cores and, with `cuda`, one H100."""
    return MachineFacts(
        cpu_count=cpus,
        cpu_count_os=cpus,
        cpu_limit="test",
        cuda_available=cuda,
        gpu_count=int(cuda),
        gpu_model="H100" if cuda else None,
        cuda_version="12.8" if cuda else None,
        mps_available=mps,
        platform="test",
    )


def machine_profile(cpus: int, env_runner: str = hardware.BATCHED_ENV_RUNNER) -> HardwareProfile:
    """The `cpu` profile of a made-up machine with `cpus` cores and no GPU."""
    return hardware.choose_profile("cpu", machine_facts(cpus), env_runner)


def recorded_context(tmp_path, *, root_seed: int, cpus: int = 2, budget_cap=RowBudget(), resume=None):
    """(context, recorder) of a started smoke run "test" under tmp_path; the caller finishes the recorder."""
    seeds = seeding.SeedStreams(root_seed)
    layout = RunLayout(tmp_path / "results", tmp_path / "artifacts", "test", smoke=True)
    manifest = RunManifest(
        run_id="test",
        status=None,
        experiment=ExperimentRecord("test"),
        seed=root_seed,
        options={"smoke": True},
        paths={},
    )
    recorder = session.RunSession(layout=layout, manifest=manifest, seeds=seeds, budget_cap=budget_cap)
    recorder.start()
    context = RunContext(
        run_id="test",
        recipe="test",
        seed=root_seed,
        smoke=True,
        results_dir=recorder.results_dir,
        artifacts_dir=recorder.artifacts_dir,
        hardware=machine_profile(cpus),
        resume=resume,
        seeds=seeds,
        session=recorder,
    )
    return context, recorder
