"""The options of pyggml itself (not of one device), each group read from the environment at its own edge: plugin
loading, the default device, the scheduler, the meta device, MPI. The devices' groups are their plugins'
(`Registry.options_type`); `pyggml options` and docs/options.md list all of them."""

from __future__ import annotations

from dataclasses import dataclass

from pyggml.backend.option_parsers import choice, flag, level, names, seconds, seconds_or_forever
from pyggml.backend.options import Options, option


@dataclass(frozen=True)
class PluginOptions(Options):
    """Read when the plugins are loaded (`BackendHub.load()`, the first time anything asks for a device)."""

    label = "plugins"
    backends: tuple[str, ...] = option((), env="PYGGML_BACKENDS", parse=names, default_doc="every plugin",
                                       doc="load only these plugins or registries (each must then load)")
    strict: bool = option(False, env="PYGGML_STRICT_PLUGINS", parse=flag,
                          doc="a plugin that fails to load or to enumerate its devices is an error, not a record")
    timeout: float | None = option(30.0, env="PYGGML_PLUGIN_TIMEOUT", parse=seconds_or_forever,
                                   doc="seconds one registry's device enumeration may take (0: no limit)")


@dataclass(frozen=True)
class ChoiceOptions(Options):
    """Read at each `default_device()` / `init_best()` call without a name (`pyggml.backend.choice`): the user's
    say over the ranking."""

    label = "default device"
    device: str | None = option(None, env="PYGGML_DEVICE", parse=str.strip, default_doc="the best there is",
                                doc="the default device (a device or registry name), over plugin priority and "
                                    "device type")


@dataclass(frozen=True)
class SchedulerOptions(Options):
    """Read when a `Scheduler` is made (its `options` argument replaces them)."""

    label = "scheduler"
    debug: int = option(0, env="PYGGML_SCHED_DEBUG", parse=level,
                        doc="print each plan to stderr: 1 its splits and their inputs, 2 every node too "
                            "(docs/scheduler.md)")


ALLREDUCE = ("auto", "inprocess", "butterfly")
"""The communicators the meta device makes by name (`pyggml.backend.meta.allreduce.make_communicator`)."""


@dataclass(frozen=True)
class MetaOptions(Options):
    """Read when a meta device's first backend is made; `init_backend("allreduce=...")` and `MetaBackend(comm=)`
    choose per backend."""

    label = "meta"
    allreduce: str = option("auto", env="PYGGML_META_ALLREDUCE", parse=choice(*ALLREDUCE), per_backend=True,
                            doc="the allreduce of a tensor split: auto (a registry's comm_init, else butterfly), "
                                "inprocess, butterfly (docs/meta-device.md)")


@dataclass(frozen=True)
class MPIOptions(Options):
    """Read when an `MPIWorld` is made (its `timeout` argument replaces it): every collective of the ranks waits at
    most this long."""

    label = "mpi"
    timeout: float = option(60.0, env="PYGGML_MPI_TIMEOUT", parse=seconds,
                            doc="seconds a collective may wait for the other ranks before naming the lost ones")


CORE_GROUPS: tuple[type[Options], ...] = (PluginOptions, ChoiceOptions, SchedulerOptions, MetaOptions, MPIOptions)
"""pyggml's own groups, in the order `pyggml options` and docs/options.md list them."""
