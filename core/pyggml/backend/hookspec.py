"""pluggy hook specification for backend plugins.

A plugin is a module named by an entry point in group `pyggml.backends`. It implements one hook:

    from pyggml.backend.hookspec import hookimpl

    @hookimpl
    def pyggml_backend_registries() -> list[Registry]:
        return [MyRegistry()]      # cheap: no driver call here

Importing the module and calling the hook must not touch a driver; devices are enumerated later, lazily.
"""

from __future__ import annotations

import pluggy

from pyggml.backend.protocol import Registry

PROJECT = "pyggml"
ENTRY_POINT_GROUP = "pyggml.backends"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class BackendHooks:
    @hookspec
    def pyggml_backend_registries(self) -> list[Registry]:  # type: ignore[empty-body]
        """The registries this plugin provides."""
