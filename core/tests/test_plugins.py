"""Plugin discovery: a broken plugin, installed through a real entry point of a throwaway distribution, is
isolated and reported while the numpy device stays usable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _throwaway_dist(root: Path, name: str, module_body: str, ep_name: str) -> None:
    """Write a minimal installed distribution (dist-info with an entry point) plus its module under root."""
    (root / f"{name}.py").write_text(textwrap.dedent(module_body))
    info = root / f"{name}-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(f"[pyggml.backends]\n{ep_name} = {name}\n")
    (info / "RECORD").write_text("")


def _registry_plugin(name: str, devices_body: str) -> str:
    """The module of a plugin whose one registry, `name`, misbehaves when asked for its devices (`devices_body`)."""
    return f"""
import threading
from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1

class Misbehaving(Registry):
    def __init__(self):
        super().__init__({name!r})

    def devices(self):
        {devices_body}

@hookimpl
def pyggml_backend_registries():
    return [Misbehaving()]
"""


def _run(args: list[str], path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(path) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env)
    return subprocess.run([sys.executable, "-m", "pyggml.cli", *args], capture_output=True, text=True, env=e,
                          timeout=120)


@pytest.fixture
def broken_plugin(tmp_path: Path) -> Path:
    _throwaway_dist(tmp_path, "pyggml_broken_demo", "raise RuntimeError('driver exploded at import')\n", "broken")
    return tmp_path


def test_broken_plugin_is_isolated_and_reported(broken_plugin: Path) -> None:
    devs = _run(["devices", "--json"], broken_plugin, PYGGML_BACKENDS="")
    assert devs.returncode == 0, devs.stderr
    assert "numpy" in [r["device"] for r in json.loads(devs.stdout)]

    plugins = _run(["plugins", "--json"], broken_plugin, PYGGML_BACKENDS="")
    assert plugins.returncode == 0, plugins.stderr
    rows = {p["name"]: p for p in json.loads(plugins.stdout)}
    assert rows["broken"]["status"] == "error"
    assert rows["broken"]["distribution"] == "pyggml_broken_demo"
    assert "driver exploded at import" in rows["broken"]["error"]
    assert rows["numpy"]["status"] == "loaded"


def test_strict_mode_makes_load_errors_fatal(broken_plugin: Path) -> None:
    r = _run(["devices"], broken_plugin, PYGGML_STRICT_PLUGINS="1", PYGGML_BACKENDS="")
    assert r.returncode != 0
    assert "broken" in r.stderr and "driver exploded" in r.stderr


def test_enumeration_failure_is_recorded(tmp_path: Path) -> None:
    body = _registry_plugin("flaky", 'raise OSError("no such device node /dev/flaky0")')
    _throwaway_dist(tmp_path, "pyggml_flaky_demo", body, "flaky")
    r = _run(["devices", "--json"], tmp_path, PYGGML_BACKENDS="")
    assert r.returncode == 0, r.stderr
    rows = {row["registry"]: row for row in json.loads(r.stdout)}
    assert rows["flaky"]["device"] is None
    assert "no such device node" in rows["flaky"]["reason"]
    assert rows["numpy"]["device"] == "numpy"


def test_backend_selection(broken_plugin: Path) -> None:
    r = _run(["plugins", "--json"], broken_plugin, PYGGML_BACKENDS="numpy")
    assert r.returncode == 0, r.stderr
    rows = {p["name"]: p for p in json.loads(r.stdout)}
    assert rows["broken"]["status"] == "disabled"
    missing = _run(["devices"], broken_plugin, PYGGML_BACKENDS="numpy,nosuchbackend")
    assert missing.returncode != 0 and "nosuchbackend" in missing.stderr


_HUNG = _registry_plugin("hung", "threading.Event().wait()  # a driver call that never returns")


def test_a_hung_registry_delays_only_what_asks_for_it(tmp_path: Path) -> None:
    """A registry whose devices() blocks stalled every command, init_backend('cpu') included (issue 19)."""
    _throwaway_dist(tmp_path, "pyggml_hung_demo", _HUNG, "hung")
    code = ("import time; from pyggml.backend.registry import init_backend; t = time.time(); "
            "b = init_backend('numpy'); print(b.name, round(time.time() - t, 1))")
    e = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
             PYGGML_BACKENDS="", PYGGML_PLUGIN_TIMEOUT="600")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "numpy" and float(r.stdout.split()[1]) < 10
    devs = _run(["devices", "--json"], tmp_path, PYGGML_BACKENDS="", PYGGML_PLUGIN_TIMEOUT="1")
    assert devs.returncode == 0, devs.stderr
    rows = {row["registry"]: row for row in json.loads(devs.stdout)}
    assert rows["hung"]["device"] is None
    assert "did not finish within 1 s" in rows["hung"]["reason"] and "pyggml_hung_demo" in rows["hung"]["reason"]
    assert "PYGGML_PLUGIN_TIMEOUT" in rows["hung"]["reason"]
    assert rows["numpy"]["device"] == "numpy"


_IMPOSTOR = """
from pyggml.backend.hookspec import hookimpl
from pyggml.reference.backend import NumpyRegistry

PYGGML_API_VERSION = 1

class Impostor(NumpyRegistry):
    pass

@hookimpl
def pyggml_backend_registries():
    return [Impostor()]
"""


def test_a_registry_name_collision_is_reported_not_resolved_silently(tmp_path: Path) -> None:
    """A plugin registering "numpy" sorts before the real one: it used to take the name and the real plugin was
    rejected. The plugin whose entry point carries the name keeps it; the error names both distributions."""
    _throwaway_dist(tmp_path, "aaa_impostor_demo", _IMPOSTOR, "aaa")
    r = _run(["plugins", "--json"], tmp_path, PYGGML_BACKENDS="")
    assert r.returncode == 0, r.stderr
    rows = {p["name"]: p for p in json.loads(r.stdout)}
    assert rows["numpy"]["status"] == "loaded" and rows["numpy"]["registries"] == ["numpy"]
    assert rows["aaa"]["status"] == "error"
    assert "aaa_impostor_demo" in rows["aaa"]["error"] and "pyggml" in rows["aaa"]["error"]
    assert "registry name 'numpy'" in r.stderr
    code = "from pyggml.backend.registry import get_registry; print(type(get_registry('numpy')).__name__)"
    e = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
             PYGGML_BACKENDS="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=60)
    assert out.stdout.strip() == "NumpyRegistry", out.stderr
    strict = _run(["devices"], tmp_path, PYGGML_BACKENDS="", PYGGML_STRICT_PLUGINS="1")
    assert strict.returncode != 0 and "aaa_impostor_demo" in strict.stderr


def _versioned(declaration: str, registry: str) -> str:
    """A plugin module with the given API declaration whose hook registers a working one-device registry; if an
    incompatible module's hook were called anyway, its registry would show up in `pyggml devices`."""
    return f"""
{declaration}
from pyggml.backend.hookspec import hookimpl
from pyggml.reference.backend import NumpyDevice, NumpyRegistry

class Reg(NumpyRegistry):
    def __init__(self):
        super(NumpyRegistry, self).__init__({registry!r})
        self._devices = [NumpyDevice(self)]

@hookimpl
def pyggml_backend_registries():
    return [Reg()]
"""


def test_a_plugin_of_another_backend_api_is_reported_and_not_loaded(tmp_path: Path) -> None:
    """The registry's api_version defaulted to the core's own, so no plugin could ever mismatch (issue 24). Now the
    entry-point module declares PYGGML_API_VERSION; a plugin declaring another one, or none, is reported with both
    versions, contributes no registry, and the other plugins load."""
    from pyggml import __version__
    from pyggml.backend.protocol import API_VERSION

    _throwaway_dist(tmp_path, "pyggml_future_demo", _versioned(f"PYGGML_API_VERSION = {API_VERSION + 1}", "future"),
                    "future")
    _throwaway_dist(tmp_path, "pyggml_undeclared_demo", _versioned("", "undeclared"), "undeclared")
    _throwaway_dist(tmp_path, "pyggml_current_demo", _versioned(f"PYGGML_API_VERSION = {API_VERSION}", "current"),
                    "current")
    r = _run(["plugins", "--json"], tmp_path, PYGGML_BACKENDS="")
    assert r.returncode == 0, r.stderr
    rows = {p["name"]: p for p in json.loads(r.stdout)}
    future, undeclared = rows["future"], rows["undeclared"]
    assert future["status"] == undeclared["status"] == "incompatible"
    assert future["api_version"] == API_VERSION + 1 and undeclared["api_version"] is None
    assert future["registries"] == undeclared["registries"] == []
    assert f"implements backend API {API_VERSION + 1}" in future["error"]
    assert f"pyggml {__version__} implements backend API {API_VERSION}" in future["error"]
    assert "pyggml_future_demo 0.0.1" in future["error"]
    assert "declares no backend API version (PYGGML_API_VERSION missing" in undeclared["error"]
    assert rows["current"]["status"] == rows["numpy"]["status"] == "loaded"
    assert rows["current"]["api_version"] == API_VERSION

    text = _run(["plugins"], tmp_path, PYGGML_BACKENDS="")
    assert text.returncode == 0, text.stderr
    line = next(ln for ln in text.stdout.splitlines() if ln.startswith("future"))
    assert f"api={API_VERSION + 1}" in line and "incompatible" in line
    assert f"implements backend API {API_VERSION + 1}, this pyggml {__version__} implements backend API " \
           f"{API_VERSION}" in text.stdout

    devs = _run(["devices", "--json"], tmp_path, PYGGML_BACKENDS="")
    assert devs.returncode == 0, devs.stderr
    registries = {row["registry"] for row in json.loads(devs.stdout)}
    assert "current" in registries and "numpy" in registries
    assert not registries & {"future", "undeclared"}

    strict = _run(["devices"], tmp_path, PYGGML_BACKENDS="", PYGGML_STRICT_PLUGINS="1")
    assert strict.returncode != 0 and "pyggml_future_demo" in strict.stderr


@pytest.mark.parametrize("target", ["missing.mod:f", "pyggml.ops:no_such_function"])
def test_graph_of_a_missing_function_is_a_usage_error(tmp_path: Path, target: str) -> None:
    r = _run(["graph", target], tmp_path)
    assert r.returncode == 2 and "cannot load" in r.stderr and "Traceback" not in r.stderr
