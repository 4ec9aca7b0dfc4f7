"""The numeric platform: what decides which floating-point kernels a run executed, as a typed record.

    from rl.harness.run import platform

    cpu = platform.read_cpu()                     # vendor, model, x86-64 level, SIMD extensions (/proc/cpuinfo)
    record = platform.NumericPlatform(cpu=cpu, torch_cpu_capability="AVX512", ...)   # training/numeric_platform.gather()
    platform.differences(recorded, here)          # ["cpu.isa_level", "torch_cpu_capability", ...]
    platform.describe(record)                     # one line for `show`

Two runs with the same seed and settings give bit-identical rows only where every field of this
record agrees (`IDENTITY_SCOPE`): the same CPU instructions, the same kernel-dispatch settings, the
same thread counts and library versions, and on a GPU the same device, CUDA stack and determinism
switches. Manifests written before the record existed read with `platform` None: unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

CPUINFO = "/proc/cpuinfo"

# x86-64 micro-architecture levels (the psABI's), as /proc/cpuinfo names their flags; each level
# includes the one before. `pni` is SSE3, `abm` carries LZCNT.
X86_64_LEVELS = (
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)
# Extensions beyond the levels that libraries dispatch on (oneDNN's AMX and bf16/fp16 kernels, MKL's VNNI paths).
DISPATCHED_EXTENSIONS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
)

IDENTITY_SCOPE = (
    "identical rows are promised on the same numeric platform only: every field of the manifest's"
    " `platform` (CPU vendor, model and instruction set, torch's CPU capability, the kernel-dispatch"
    " settings, numpy's SIMD, thread counts, MKL/oneDNN/OpenBLAS versions, and on a GPU its model,"
    " compute capability, CUDA, cuDNN, driver and determinism switches)"
)


@dataclasses.dataclass(frozen=True)
class CpuPlatform:
    """The processor as /proc/cpuinfo reports it (first CPU): vendor, model, and the instructions it offers."""

    vendor: str | None = None
    model_name: str | None = None
    family: str | None = None
    model: str | None = None
    isa_level: str | None = None  # "x86-64-v4", ...; None off x86-64
    extensions: tuple[str, ...] = ()  # DISPATCHED_EXTENSIONS this CPU has

    @classmethod
    def from_dict(cls, record: Mapping) -> CpuPlatform:
        return cls(**{**record, "extensions": tuple(record.get("extensions") or ())})


@dataclasses.dataclass(frozen=True)
class GpuPlatform:
    """The GPU the learner ran on and the CUDA stack and switches that decide its kernels."""

    model: str | None = None
    compute_capability: str | None = None  # "9.0"
    cuda: str | None = None  # the CUDA torch was built with
    cudnn: str | None = None
    driver: str | None = None
    determinism: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # hardware.torch_determinism

    @classmethod
    def from_dict(cls, record: Mapping) -> GpuPlatform:
        return cls(**record)


@dataclasses.dataclass(frozen=True)
class NumericPlatform:
    """Every fact that decides which kernels ran (module docstring); gathered by training/numeric_platform."""

    cpu: CpuPlatform
    torch_cpu_capability: str | None = None  # torch.backends.cpu.get_cpu_capability(): "AVX512", "DEFAULT", ...
    kernel_dispatch: Mapping[str, str] = dataclasses.field(
        default_factory=dict
    )  # settings.KERNEL_DISPATCH_VARIABLES set
    numpy_simd: tuple[str, ...] = ()  # numpy's dispatched SIMD targets in use (above its baseline)
    numpy_simd_baseline: tuple[str, ...] = ()
    threads: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # torch's counts and the thread variables
    libraries: Mapping[str, str | None] = dataclasses.field(default_factory=dict)  # MKL, oneDNN, OpenBLAS (+ core)
    gpu: GpuPlatform | None = None

    @classmethod
    def from_dict(cls, record: Mapping | None) -> NumericPlatform | None:
        if record is None:
            return None
        return cls(
            **{
                **record,
                "cpu": CpuPlatform.from_dict(record.get("cpu") or {}),
                "numpy_simd": tuple(record.get("numpy_simd") or ()),
                "numpy_simd_baseline": tuple(record.get("numpy_simd_baseline") or ()),
                "gpu": GpuPlatform.from_dict(record["gpu"]) if record.get("gpu") else None,
            }
        )

    def to_dict(self) -> dict:
        document = dataclasses.asdict(self)
        document["cpu"]["extensions"] = list(self.cpu.extensions)
        document["numpy_simd"], document["numpy_simd_baseline"] = list(self.numpy_simd), list(self.numpy_simd_baseline)
        return document


def parse_cpuinfo(text: str) -> CpuPlatform:
    """The first processor's entry of /proc/cpuinfo as a CpuPlatform (x86 and Arm field names)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    level = None
    if "lm" in flags:  # long mode: x86-64
        level = "x86-64"
        for name, required in X86_64_LEVELS:
            if not flags.issuperset(required):
                break
            level = name
    return CpuPlatform(
        vendor=fields.get("vendor_id") or fields.get("CPU implementer"),
        model_name=fields.get("model name") or fields.get("CPU part"),
        family=fields.get("cpu family") or fields.get("CPU architecture"),
        model=fields.get("model") or fields.get("CPU variant"),
        isa_level=level,
        extensions=tuple(extension for extension in DISPATCHED_EXTENSIONS if extension in flags),
    )


def read_cpu(path: str = CPUINFO) -> CpuPlatform:
    """This machine's CpuPlatform; all fields None where /proc/cpuinfo is missing (not Linux)."""
    try:
        with open(path) as handle:
            return parse_cpuinfo(handle.read())
    except OSError:
        return CpuPlatform()


def _flat(record: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves by dotted path; an empty mapping has none (so `{}` and a mapping holding a key differ in that key)."""
    if not isinstance(record, dict):
        return {prefix: record}
    flat = {}
    for key, value in record.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else key))
    return flat


def differences(a: NumericPlatform | None, b: NumericPlatform | None) -> list[str]:
    """The fields (dotted, e.g. `kernel_dispatch.ATEN_CPU_CAPABILITY`) whose values differ; ["platform (unknown)"]
    when either run recorded none."""
    if a is None or b is None:
        return [] if a is b else ["platform (unknown)"]
    flat_a, flat_b = _flat(a.to_dict()), _flat(b.to_dict())
    return [key for key in sorted(set(flat_a) | set(flat_b)) if flat_a.get(key) != flat_b.get(key)]


def describe_difference(a: NumericPlatform, b: NumericPlatform, field: str) -> str:
    """`field: value in a -> value in b`, e.g. `torch_cpu_capability: "DEFAULT" -> "AVX512"`."""
    flat_a, flat_b = _flat(a.to_dict()), _flat(b.to_dict())
    return f"{field}: {flat_a.get(field)!r} -> {flat_b.get(field)!r}"


def describe(record: NumericPlatform | None) -> list[str]:
    """A few lines for `show`: CPU and level, torch's capability and dispatch settings, libraries, GPU."""
    if record is None:
        return ["unknown (recorded before the manifest held it)"]
    cpu = record.cpu
    dispatch = ", ".join(f"{name}={value}" for name, value in sorted(record.kernel_dispatch.items())) or "none set"
    lines = [
        (
            f"cpu: {cpu.vendor or '?'} {cpu.model_name or '?'}, {cpu.isa_level or '?'}"
            f" ({' '.join(cpu.extensions) or 'no extensions'})"
        ),
        (
            f"kernels: torch {record.torch_cpu_capability or '?'}, numpy {' '.join(record.numpy_simd) or 'baseline'};"
            f" dispatch settings: {dispatch}"
        ),
        "libraries: " + ", ".join(f"{name} {value}" for name, value in sorted(record.libraries.items())),
        "threads: " + ", ".join(f"{name} {value}" for name, value in sorted(record.threads.items())),
    ]
    if record.gpu is not None:
        gpu = record.gpu
        lines.append(
            f"gpu: {gpu.model} (compute {gpu.compute_capability}), CUDA {gpu.cuda}, cuDNN {gpu.cudnn},"
            f" driver {gpu.driver}; " + ", ".join(f"{key} {value}" for key, value in sorted(gpu.determinism.items()))
        )
    return lines
