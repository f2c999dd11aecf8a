"""Metal shares the Vulkan plugin's shaders and op rules only through pyggml-glsl's public names (issue 34): no source
of pyggml_metal names pyggml_vulkan, every name it takes from pyggml_glsl is public, and pyggml_metal imports, plans
and runs graphs with pyggml_vulkan refused by the import system. A rename inside pyggml_vulkan's private modules
cannot break pyggml_metal."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyggml_metal

PKG = Path(pyggml_metal.__file__).resolve().parent
SOURCES = sorted(PKG.rglob("*.py"))


def _glsl_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every name `path` takes from pyggml_glsl (name "" for a plain `import pyggml_glsl.x`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "pyggml_glsl":
                found += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.split(".")[0] == "pyggml_glsl"]
    return found


def test_no_source_of_pyggml_metal_names_pyggml_vulkan() -> None:
    assert SOURCES
    naming = [p.relative_to(PKG).as_posix() for p in SOURCES if "pyggml_vulkan" in p.read_text()]
    assert not naming, f"pyggml_metal modules naming pyggml_vulkan: {naming}"


def test_metal_takes_only_public_names_of_pyggml_glsl() -> None:
    taken = [(p.relative_to(PKG).as_posix(), m, n) for p in SOURCES for m, n in _glsl_imports(p)]
    assert {"pyggml_glsl.rules", "pyggml_glsl.builder"} <= {m for _, m, _ in taken}
    for where, module, name in taken:
        assert not any(part.startswith("_") for part in module.split(".")), f"{where}: private module {module}"
        assert not name.startswith("_"), f"{where}: private name {module}.{name}"
        if name:
            assert hasattr(importlib.import_module(module), name), f"{where}: {module} has no {name}"


REFUSE_VULKAN = """
import importlib.abc, sys

class RefuseVulkan(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyggml_vulkan", "vulkan"):
            raise ImportError(f"{name} is refused: pyggml_metal must not need it")
        return None

for m in [m for m in sys.modules if m.split(".")[0] in ("pyggml_vulkan", "vulkan")]:
    del sys.modules[m]
sys.meta_path.insert(0, RefuseVulkan())
"""

IMPORT_ALL = """
import pkgutil
import pyggml_metal
for m in pkgutil.iter_modules(pyggml_metal.__path__):
    if m.name != "objc_driver":  # PyObjC, macOS only
        importlib.import_module(f"pyggml_metal.{m.name}")
from pyggml_metal.op_table import CLAIMED, TABLE
assert len(TABLE) == len(CLAIMED) > 80, (len(TABLE), len(CLAIMED))
"""

RUN_ON_SIM = """
import os
import numpy as np
from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml_metal_sim.registry import MetalSimRegistry
from pyggml_testing.on_device import place_graph

os.environ["PYGGML_METAL_SIM"] = "1"
dev = next(d for d in MetalSimRegistry().devices() if d.name == "MetalSim0")
ctx = Context(no_alloc=True)
w = ctx.new_tensor("f32", 64, 8, name="w")
x = ctx.new_tensor("f32", 64, 3, name="x")
ids = ctx.new_tensor("i32", 2, name="ids")
y = ops.soft_max(ops.scale(ops.mul_mat(w, x), 0.5))
r = ops.get_rows(w, ids)
g = build_graph(y, r)
buf = place_graph(g, dev.buffer_type())
rng = np.random.default_rng(0)
wv, xv = rng.standard_normal((8, 64)).astype(np.float32), rng.standard_normal((3, 64)).astype(np.float32)
w.set(wv)
x.set(xv)
ids.set(np.array([5, 1], np.int32))
dev.init_backend().graph_compute(g)
z = xv @ wv.T * 0.5
e = np.exp(z - z.max(axis=1, keepdims=True))
np.testing.assert_allclose(y.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
np.testing.assert_array_equal(r.numpy(), wv[[5, 1]])
print("ran on", dev.name)
"""

CHECK_NONE_LOADED = """
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyggml_vulkan", "vulkan"))
assert not loaded, loaded
print("OK")
"""


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return r.stdout


def test_metal_imports_with_pyggml_vulkan_refused() -> None:
    """Every module of pyggml_metal and its op table, with `import pyggml_vulkan` (and the `vulkan` binding)
    failing."""
    out = _run(REFUSE_VULKAN + IMPORT_ALL + CHECK_NONE_LOADED)
    assert out.strip().endswith("OK")


def test_metal_plans_and_runs_with_pyggml_vulkan_refused() -> None:
    """The GLSL rules build a plan through MetalDispatchBuilder and MetalSim0 runs it (MUL_MAT, SCALE, SOFT_MAX and
    GET_ROWS, whose index check binds the status word), with pyggml_vulkan refused. The emulator compiles the MSL
    with g++ on Linux; elsewhere the plan is not run."""
    if sys.platform != "linux" or shutil.which("g++") is None:
        pytest.skip("the emulator (g++, ucontext fibers) runs on Linux")
    out = _run(REFUSE_VULKAN + IMPORT_ALL + RUN_ON_SIM + CHECK_NONE_LOADED)
    assert "ran on MetalSim0" in out and out.strip().endswith("OK")
