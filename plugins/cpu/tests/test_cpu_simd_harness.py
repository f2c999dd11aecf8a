"""Every SIMD kernel level against the portable kernels, through simd_harness.c (beside this file) built from the
extension's C sources with the wheel's own flags: natively (the x86-64 levels this CPU has, or NEON on an arm64
host) and, elsewhere, for arm64 with a cross compiler, run under qemu-user: NEON and NEON + SDOT on a CPU model
that has the dot product instructions, plain NEON on one that lacks them (the run-time check must fall back)."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pyggml_cpu import native
from pyggml_cpu._build import COMPILE_ARGS, CSRC, INCLUDE_DIRS, LIBRARIES
from pyggml_cpu.options import available_cores

HARNESS = Path(__file__).with_name("simd_harness.c")
X86_LEVELS = ["avx2", "avx2+vnni", "avx512", "avx512+vnni"]
ARM_CROSS = "aarch64-linux-gnu-gcc"
QEMU = "qemu-aarch64"
ARM_SYSROOT = "/usr/aarch64-linux-gnu"


def _cc(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[-4000:]}"


def build(cc: str, out: Path) -> Path:
    """The harness and the extension's sources compiled a core each (as the wheel's build does), then linked."""
    sources = [HARNESS, *sorted(Path(CSRC).glob("*.c"))]
    objects = [out.with_name(f"{out.name}.{src.stem}.o") for src in sources]
    flags = [*COMPILE_ARGS, *(f"-I{d}" for d in INCLUDE_DIRS)]
    with ThreadPoolExecutor(available_cores()) as pool:
        list(pool.map(lambda src, obj: _cc([cc, *flags, "-c", str(src), "-o", str(obj)]), sources, objects))
    _cc([cc, *(str(o) for o in objects), "-o", str(out), *(f"-l{lib}" for lib in LIBRARIES)])
    return out


def run(cmd: list[str]) -> dict[str, list[str]]:
    """Run the harness; its 'key: words' lines as a dict. A failed check fails the test with the harness output."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("OK"), r.stdout[-4000:] + r.stderr[-2000:]
    return {k.strip(): v.split() for k, _, v in (line.partition(":") for line in r.stdout.splitlines()) if v}


def native_cc() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) or shutil.which("cc")


@pytest.fixture(scope="module")
def arm_harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if platform.machine() in ("aarch64", "arm64"):
        pytest.skip("an arm64 host: the native harness checks the NEON kernels")
    missing = [t for t in (ARM_CROSS, QEMU) if shutil.which(t) is None]
    if missing or not Path(ARM_SYSROOT).is_dir():
        pytest.skip(f"no {', '.join(missing) or ARM_SYSROOT} to build and run arm64 code "
                    f"(apt-get install gcc-aarch64-linux-gnu qemu-user)")
    return build(ARM_CROSS, tmp_path_factory.mktemp("arm64") / "simd_harness")


def test_native_levels_match_portable(tmp_path: Path) -> None:
    cc = native_cc()
    if cc is None:
        pytest.skip("no C compiler")
    out = run([str(build(cc, tmp_path / "simd_harness"))])
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        f = native.cpu_features()
        if f["avx2"] and f["fma"] and f["f16c"]:
            assert "avx2" in out["checked"]
        assert set(out["checked"]) | set(out["skipped"]) >= set(X86_LEVELS)
    elif machine in ("aarch64", "arm64"):
        assert "neon" in out["checked"]


def test_neon_and_sdot_match_portable_under_qemu(arm_harness: Path) -> None:
    out = run([QEMU, "-L", ARM_SYSROOT, "-cpu", "max", str(arm_harness)])
    assert out["checked"] == ["neon", "neon+dotprod"]
    assert out["best"] == ["neon+dotprod"]


def test_a_cpu_without_sdot_runs_plain_neon(arm_harness: Path) -> None:
    out = run([QEMU, "-L", ARM_SYSROOT, "-cpu", "cortex-a57", str(arm_harness)])  # Armv8.0: no dot product
    assert out["checked"] == ["neon"]
    assert "neon+dotprod" in out["skipped"]
    assert out["best"] == ["neon"]
