"""The numeric platform: reading the CPU, gathering what torch and numpy dispatch to, the portable profile,
and how `show`, `diff` and `reproduce` name differing fields (no Ray)."""

import dataclasses
import json

import pytest
import torch

from rl.harness import env_vars
from rl.harness.commands import catalog, cli, reproduce
from rl.harness.run import finder, platform, records
from rl.harness.run.manifest import read_manifest
from rl.harness.tests import contexts, run_helpers
from rl.harness.training import hardware, numeric_platform

_X86_BASE = "fpu vme lm cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3 sse sse2"
_V3 = "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"
_V4 = "avx512f avx512bw avx512cd avx512dq avx512vl avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8"


def _cpuinfo(flags, vendor="GenuineIntel", model_name="Intel(R) Xeon(R) Platinum 8480+"):
    entry = f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: {model_name}\nflags\t\t: {flags}\n"
    return entry + "\n" + entry.replace("processor\t: 0", "processor\t: 1")


@pytest.mark.parametrize(
    "flags, level, extensions",
    [
        (
            f"{_X86_BASE} {_V3} {_V4}",
            "x86-64-v4",
            ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"),
        ),
        (f"{_X86_BASE} {_V3}", "x86-64-v3", ("avx", "avx2", "fma")),
        (f"{_X86_BASE} avx avx2", "x86-64-v2", ("avx", "avx2")),  # AVX2 without FMA and BMI is not v3
        ("fpu lm sse sse2", "x86-64", ()),
    ],
)
def test_the_x86_64_level_and_extensions_come_from_cpuinfo_flags(flags, level, extensions):
    cpu = platform.parse_cpuinfo(_cpuinfo(flags))
    assert (cpu.vendor, cpu.model_name, cpu.family, cpu.model) == (
        "GenuineIntel",
        "Intel(R) Xeon(R) Platinum 8480+",
        "6",
        "143",
    )
    assert cpu.isa_level == level and cpu.extensions == extensions


def test_an_arm_cpu_has_no_x86_level_but_its_features():
    cpu = platform.parse_cpuinfo(
        "processor\t: 0\nFeatures\t: fp asimd sve sve2\nCPU implementer\t: 0x41\n"
        "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
    )
    assert (cpu.vendor, cpu.isa_level, cpu.extensions) == ("0x41", None, ("asimd", "sve", "sve2"))
    assert platform.read_cpu("/no/such/cpuinfo") == platform.CpuPlatform()


INTEL = platform.NumericPlatform(
    cpu=platform.parse_cpuinfo(_cpuinfo(f"{_X86_BASE} {_V3} {_V4}")),
    torch_cpu_capability="AVX512",
    numpy_simd=("X86_V3", "X86_V4"),
    threads={"torch": 1},
    libraries={"mkl": "2024.2", "openblas_core": "SapphireRapids"},
)


def test_differences_name_each_field_and_unknown_platforms():
    pinned = dataclasses.replace(
        INTEL,
        torch_cpu_capability="AVX2",
        kernel_dispatch={"OPENBLAS_CORETYPE": "Haswell"},
        libraries={**INTEL.libraries, "openblas_core": "Haswell"},
    )
    assert platform.differences(INTEL, INTEL) == []
    assert platform.differences(INTEL, pinned) == [
        "kernel_dispatch.OPENBLAS_CORETYPE",
        "libraries.openblas_core",
        "torch_cpu_capability",
    ]
    assert (
        platform.describe_difference(INTEL, pinned, "torch_cpu_capability")
        == "torch_cpu_capability: 'AVX512' -> 'AVX2'"
    )
    amd = dataclasses.replace(INTEL, cpu=dataclasses.replace(INTEL.cpu, vendor="AuthenticAMD"))
    assert platform.differences(INTEL, amd) == ["cpu.vendor"]
    assert platform.differences(None, INTEL) == ["platform (unknown)"] and platform.differences(None, None) == []


def test_the_dispatch_and_thread_variables_are_read_only_when_set():
    environ = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1", "HOME": "/root"}
    assert env_vars.kernel_dispatch_variables(environ) == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
    assert env_vars.thread_variables(environ) == {"OMP_NUM_THREADS": "1"}


def test_gather_reports_what_torch_and_numpy_dispatch_to_in_this_process(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    record = numeric_platform.gather()
    assert record.cpu == platform.read_cpu()
    assert record.torch_cpu_capability == torch.backends.cpu.get_cpu_capability()
    assert record.kernel_dispatch["MKL_CBWR"] == "AUTO"
    assert record.numpy_simd == numeric_platform.numpy_simd()[0] and record.numpy_simd_baseline
    assert record.threads["torch"] == torch.get_num_threads()
    assert record.libraries["mkl"] and record.libraries["onednn"] and record.libraries["openblas_core"]
    assert record.gpu is None  # these tests run on CPU
    assert platform.NumericPlatform.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_probe_sees_the_level_a_fresh_process_would_run_at():
    probed = numeric_platform.probe(run_helpers.child_env(ATEN_CPU_CAPABILITY="default"))
    assert probed.torch_cpu_capability == "DEFAULT" and probed.kernel_dispatch["ATEN_CPU_CAPABILITY"] == "default"
    here = numeric_platform.gather()
    assert "torch_cpu_capability" in platform.differences(here, probed)
    line = reproduce.format_platform_comparison(here, probed)
    assert line.startswith("platform differs from the original's: ") and "'DEFAULT'" in line and "\n" not in line
    assert (
        reproduce.format_platform_comparison(probed, probed) == "platform: the same numeric platform as the original's"
    )
    assert reproduce.format_platform_comparison(None, probed).startswith("platform: the original recorded none")


def test_a_failed_probe_is_one_line_naming_how_to_see_why(tmp_path, monkeypatch):
    broken = tmp_path / "python"  # an interpreter that dies at start, as one whose libraries are gone
    broken.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr("sys.executable", str(broken))
    with pytest.raises(
        numeric_platform.PlatformProbeError,
        match=r"^probing the numeric platform failed \(Fatal Python error: init_fs_encoding\); run .* to see why$",
    ):
        numeric_platform.probe(run_helpers.child_env())


# -- the portable profile -----------------------------------------------------------------------------

MACHINE = contexts.machine_facts(2)


def test_the_portable_profile_places_as_cpu_and_pins_every_library():
    portable, plain = hardware.choose_profile("cpu-portable", MACHINE), hardware.choose_profile("cpu", MACHINE)
    assert portable.name == "cpu-portable" and portable.torch_device == "cpu" == portable.learner_device
    assert dataclasses.replace(portable, name="cpu", requested="cpu", kernel_dispatch={}) == plain
    assert portable.kernel_dispatch["ATEN_CPU_CAPABILITY"] == "default"
    assert set(portable.kernel_dispatch) == {
        "ATEN_CPU_CAPABILITY",
        "MKL_CBWR",
        "ONEDNN_MAX_CPU_ISA",
        "OPENBLAS_CORETYPE",
        "NPY_DISABLE_CPU_FEATURES",
    }
    assert hardware.process_environment(portable).items() >= portable.kernel_dispatch.items()
    assert hardware.process_environment(plain) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_the_portable_profile_is_refused_off_x86_64(monkeypatch):
    monkeypatch.setattr(hardware.python_platform, "machine", lambda: "aarch64")
    with pytest.raises(
        hardware.HardwareError, match="pins x86-64 kernels, and this machine is aarch64; use --hardware-profile cpu"
    ):
        hardware.choose_profile("cpu-portable", MACHINE)
    assert hardware.choose_profile("cpu", MACHINE).name == "cpu"


def test_determinism_states_its_scope_the_numeric_platform():
    profile = hardware.choose_profile("cpu", MACHINE)
    promise = hardware.determinism(profile, hardware.place_envs(profile, 8), "direct")
    assert promise["expected"] is True and promise["scope"] == platform.IDENTITY_SCOPE
    assert "same numeric platform" in promise["scope"] and "torch's CPU capability" in promise["scope"]


def test_the_portable_profile_in_a_process_that_loaded_numpy_unpinned_is_refused(tmp_path, capsys):
    status = cli.main(
        [
            "rl-harness",
            run_helpers.FAKE,
            "--hardware-profile",
            "cpu-portable",
            "--results-dir",
            str(tmp_path / "r"),
            "--artifacts-dir",
            str(tmp_path / "a"),
        ]
    )
    error = capsys.readouterr().err.strip()
    assert status == 2 and error.count("\n") == 0, error
    assert (
        "pins the kernels before torch and numpy load" in error
        and "start the run through the rl-harness command" in error
    )
    assert not (tmp_path / "r").exists()  # refused before any record


def test_the_command_restarts_itself_with_the_pins_and_records_them(tmp_path):
    run_id = "20261205T000000Z-port01"
    status, _, stderr = run_helpers.run_cli(
        [
            run_helpers.FAKE,
            "--hardware-profile",
            "cpu-portable",
            "--run-id",
            run_id,
            "--results-dir",
            tmp_path / "r",
            "--artifacts-dir",
            tmp_path / "a",
        ]
    )
    assert status == 0, stderr[-2000:]
    recorded = read_manifest(tmp_path / "r" / run_id)
    assert recorded.hardware["profile"]["kernel_dispatch"] == recorded.platform.kernel_dispatch
    assert recorded.platform.torch_cpu_capability == "DEFAULT" and recorded.platform.numpy_simd == ()
    assert recorded.platform.libraries["openblas_core"] == "Nehalem"
    assert "cpu-portable" in recorded.command_line  # the restart kept the command line


# -- every fresh manifest holds it; show and diff print it -----------------------------------------------


def test_a_fresh_run_records_the_platform_and_show_and_diff_print_it(tmp_path):
    roots = [str(tmp_path / "r")]
    for run_id in ("20261205T000000Z-plat01", "20261205T000000Z-plat02"):
        assert (
            cli.main(
                [
                    "rl-harness",
                    run_helpers.FAKE,
                    "--run-id",
                    run_id,
                    "--results-dir",
                    roots[0],
                    "--artifacts-dir",
                    str(tmp_path / "a"),
                ]
            )
            == 0
        )
    first = finder.find_run("20261205T000000Z-plat01", roots)
    assert first.manifest.platform == numeric_platform.gather()
    shown = catalog.format_show(first)
    line = next(line for line in shown if line.startswith("  platform: cpu: "))
    assert first.manifest.platform.cpu.isa_level in line
    assert any(line.startswith(f"    kernels: torch {torch.backends.cpu.get_cpu_capability()}") for line in shown)

    second_path = tmp_path / "r" / "20261205T000000Z-plat02" / records.MANIFEST_FILE
    document = records.read_json(str(second_path), "manifest")
    # Values that differ from whatever CPU runs the test (rented machines are AMD and Intel).
    other_vendor = "GenuineIntel" if first.manifest.platform.cpu.vendor == "AuthenticAMD" else "AuthenticAMD"
    other_capability = "AVX2" if first.manifest.platform.torch_cpu_capability != "AVX2" else "AVX512"
    document["platform"]["torch_cpu_capability"] = other_capability
    document["platform"]["cpu"]["vendor"] = other_vendor
    records.write_json_atomically(str(second_path), document)
    lines = catalog.format_diff(first, finder.find_run("20261205T000000Z-plat02", roots))
    assert (
        f'  platform platform.cpu.vendor: {json.dumps(first.manifest.platform.cpu.vendor)} -> "{other_vendor}"' in lines
    )
    assert any(
        line.startswith("  platform platform.torch_cpu_capability: ") and line.endswith(f'-> "{other_capability}"')
        for line in lines
    )
    assert any(line.startswith("differ: ") and "platform (2)" in line for line in lines)


def test_an_attached_clusters_workers_get_the_pins_through_the_jobs_runtime_env(monkeypatch):
    from rl.harness.training import lifecycle

    calls = []
    monkeypatch.setattr(lifecycle.ray, "init", lambda **options: calls.append(options))
    pins = hardware.portable_kernel_dispatch()
    lifecycle.init_ray("ray://head:10001", 2, pins)
    lifecycle.init_ray("ray://head:10001", 2, {})
    assert calls == [
        {"address": "ray://head:10001", "runtime_env": {"env_vars": pins}},
        {"address": "ray://head:10001", "runtime_env": None},
    ]
