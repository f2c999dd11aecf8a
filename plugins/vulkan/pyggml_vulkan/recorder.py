"""From planned dispatches to ONE command buffer: descriptor sets (one per distinct set of bound buffers), pipeline
binds, push constants, dispatches, and a memory barrier only where a dispatch touches bytes an earlier one since
the last barrier wrote (read/write after write) or reads (write after read).

The command buffer is recorded once per (graph, placement) and replayed by resubmitting it; a leading barrier
orders it after earlier submissions and transfers, a trailing one makes results visible to host reads/copies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyggml.backend.plan_cache import check_not_freed
from pyggml.errors import AllocationError
from pyggml.ops.base import Op
from pyggml.profile.sink import runs_of
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import N_BINDINGS, Groups, Spec, bound, status_push
from pyggml_vulkan.vk import NULL, WHOLE_SIZE, C, CData, ffi, lib, new, out

if TYPE_CHECKING:
    from pyggml.backend.status import StatusWord
    from pyggml_vulkan.buffer import VulkanBuffer
    from pyggml_vulkan.context import DeviceContext

log = logging.getLogger(__name__)

Range = tuple[int, int, int]
"""(buffer handle id, first byte, end byte)."""


@dataclass(slots=True)
class Dispatch:
    pipeline: CData
    buffers: tuple[VulkanBuffer, ...]
    push: bytes
    groups: tuple[int, int, int]
    reads: tuple[Range, ...]
    writes: tuple[Range, ...]
    name: str
    checks: bool = False
    """The shader reports out-of-range indices to the status word."""
    node: Tensor | None = None
    """The graph node the dispatch computes (a timed recording stamps each node's dispatches)."""

    @property
    def set_key(self) -> tuple[int, ...]:
        return tuple(b.handle_id for b in self.buffers)


def tensor_range(t: Tensor) -> Range:
    from pyggml_vulkan.buffer import VulkanBuffer

    buf = t.buffer
    if not isinstance(buf, VulkanBuffer):
        raise AllocationError(f"Vulkan: tensor '{t.name}' {t.type} ne={list(t.ne)} is not in a Vulkan buffer "
                              f"({buf!r})")
    return (buf.handle_id, t.offset, t.offset + t.nbytes())


class DispatchBuilder:
    """Collects the dispatches of a graph: the GLSL op rules' builder (`pyggml_glsl.builder.Builder`), each
    `dispatch` a pipeline, the buffers of the shader's bindings, push constants and a grid."""

    def __init__(self, ctx: DeviceContext, scratch: Callable[[int], VulkanBuffer] | None = None,
                 status: StatusWord | None = None, forced_threads_per_row: int | None = None) -> None:
        self.ctx = ctx
        self.forced_threads_per_row = forced_threads_per_row
        """The backend's `VulkanOptions.tpr` (None: the rule decides)."""
        self.dispatches: list[Dispatch] = []
        self.node: Tensor | None = None
        self._scratch = scratch
        self.status = status

    @property
    def cpu_emulated(self) -> bool:
        return self.ctx.info.is_cpu

    def error_code(self, what: str) -> int:
        """A status code naming the current node and `what` was out of range (0 without a status word: the
        shader's report then changes nothing)."""
        if self.status is None or self.node is None:
            return 0
        return self.status.code(self.node, what)

    def scratch(self, nbytes: int) -> Tensor:
        """A temporary byte tensor in the backend's scratch buffer (offset 0; reuse across ops is ordered by the
        recorder's hazard barriers)."""
        if self._scratch is None:
            raise AllocationError("Vulkan: this planner has no scratch memory")
        t = Tensor(GGMLType.I8, (max(nbytes, 4), 1, 1, 1), op=Op.NONE)
        t.name = "vulkan scratch"
        t.buffer = self._scratch(nbytes)
        return t

    def dispatch(self, shader: str, spec: Spec, srcs: Sequence[Tensor | None], dst: Tensor, push: bytes,
                 groups: Groups, extra_writes: tuple[Tensor, ...] = (), checks: str = "") -> None:
        """checks: the shader reads indices; what an out-of-range one violates (its code goes into f3)."""
        from pyggml_vulkan.buffer import VulkanBuffer

        tensors = bound(shader, srcs, dst)
        dbuf = dst.buffer
        if not isinstance(dbuf, VulkanBuffer):
            raise AllocationError(f"Vulkan: destination '{dst.name}' is not in a Vulkan buffer ({dbuf!r})")
        reads = tuple(tensor_range(s) for s in srcs if s is not None)
        bufs: list[VulkanBuffer] = []
        for t in tensors:
            b = t.buffer
            assert isinstance(b, VulkanBuffer)  # tensor_range checked the sources
            if b.ctx is not self.ctx:
                raise AllocationError(f"Vulkan: tensor '{t.name}' lives on another Vulkan device")
            bufs.append(b)
        sbuf = self.status.buffer if self.status is not None else dbuf
        assert isinstance(sbuf, VulkanBuffer)  # the backend's word, from this device's buffer type
        bufs.append(sbuf)
        writes = (tensor_range(dst), *(tensor_range(t) for t in extra_writes))
        node = self.node
        if checks:
            push = status_push(push, self.error_code(checks))
        self.dispatches.append(Dispatch(self.ctx.pipelines.get(shader, spec), tuple(bufs), push, groups,
                                        reads, writes, node.name if node is not None else shader,
                                        bool(checks), node))


def _overlaps(r: Range, ranges: list[Range]) -> bool:
    b, s, e = r
    return any(b == b2 and s < e2 and s2 < e for b2, s2, e2 in ranges)


class Recording:
    """One recorded command buffer and the descriptor sets it uses; keeps its buffers alive. A buffer already freed
    raises AllocationError (naming `who`) before anything is made: its VkBuffer handle is gone, or another buffer's.
    Made under the context's lock, which `VulkanBuffer.free` takes to mark a buffer freed before destroying it, so
    no bound buffer is destroyed under the descriptor writes.

    `timed` (profiling only): the command buffer also writes a timestamp before and after each run of one node's
    dispatches (`runs`) into a query pool of its own, two queries per run, read by `timestamps()`. An untimed
    recording writes no query."""

    def __init__(self, ctx: DeviceContext, dispatches: list[Dispatch], who: str = "Vulkan", timed: bool = False
                 ) -> None:
        self.ctx = ctx
        self.runs = runs_of([d.node for d in dispatches]) if timed else []
        """(first, last) dispatch of each run of one node's dispatches: timed recordings stamp around each."""
        self.query_pool: CData | None = None
        self.n_dispatches = len(dispatches)
        self.n_barriers = 0
        self.barrier_before: list[int] = []
        """Indices of the dispatches recorded right after a memory barrier."""
        self.names = [d.name for d in dispatches]
        self.checks = any(d.checks for d in dispatches)
        """Some dispatch reports out-of-range indices: the status word is read after it ran."""
        self._buffers = {b.serial: b for d in dispatches for b in d.buffers}
        """Every buffer bound, held while the command buffer that binds their VkBuffer handles exists (and checked
        by object at replay: a freed buffer's handle may be a newer buffer's)."""
        self.handles = frozenset(b.handle_id for b in self._buffers.values())
        """The buffers the command buffer binds (host access to them waits while it runs)."""
        self.pool = None
        self.cb: CData | None = None
        with ctx.lock:
            self.check_alive(who)
            self.cb = ctx.allocate_command_buffer()
            try:
                if self.runs:
                    self._create_query_pool(2 * len(self.runs))
                sets = self._descriptor_sets(dispatches)
                self._record(dispatches, sets)
            except Exception:
                self.free()
                raise

    def check_alive(self, who: str) -> None:
        """AllocationError when a buffer the command buffer binds was freed since it was recorded."""
        check_not_freed(self._buffers.values(), who)

    def _create_query_pool(self, n: int) -> None:
        qp = out("VkQueryPool")
        self.ctx.check(lib.vkCreateQueryPool(self.ctx.device, new(
            "VkQueryPoolCreateInfo", sType=C.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            queryType=C.VK_QUERY_TYPE_TIMESTAMP, queryCount=n), NULL, qp), "vkCreateQueryPool")
        self.query_pool = qp[0]

    def timestamps(self) -> list[tuple[int, int]]:
        """(start, end) of each run in nanoseconds on the device's clock, counted from the first stamp (only
        durations and gaps mean anything), from the query pool of a timed recording whose submission finished
        (64-bit results, waited for)."""
        if self.query_pool is None:
            return []
        n = 2 * len(self.runs)
        data = ffi.new("uint64_t[]", n)
        self.ctx.check(lib.vkGetQueryPoolResults(
            self.ctx.device, self.query_pool, 0, n, 8 * n, data, 8,
            C.VK_QUERY_RESULT_64_BIT | C.VK_QUERY_RESULT_WAIT_BIT), "vkGetQueryPoolResults")
        info = self.ctx.info
        bits = info.timestamp_valid_bits if 0 < info.timestamp_valid_bits < 64 else 64
        mask = (1 << bits) - 1
        first = int(data[0]) & mask
        # ticks since the first stamp (modulo the counter's width: it may wrap once), then ns
        ns = [round(((int(data[i]) - first) & mask) * info.timestamp_period) for i in range(n)]
        return [(ns[2 * r], ns[2 * r + 1]) for r in range(len(self.runs))]

    def _descriptor_sets(self, dispatches: list[Dispatch]) -> dict[tuple[int, ...], CData]:
        ctx = self.ctx
        keys: dict[tuple[int, ...], tuple[VulkanBuffer, ...]] = {}
        for d in dispatches:
            keys.setdefault(d.set_key, d.buffers)
        n = max(1, len(keys))
        size = new("VkDescriptorPoolSize", type=C.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=n * N_BINDINGS)
        pool = out("VkDescriptorPool")
        ctx.check(lib.vkCreateDescriptorPool(ctx.device, new(
            "VkDescriptorPoolCreateInfo", sType=C.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=n,
            poolSizeCount=1, pPoolSizes=size), NULL, pool), "vkCreateDescriptorPool")
        self.pool = pool[0]
        if not keys:
            return {}
        layouts = ffi.new("VkDescriptorSetLayout[]", [ctx.set_layout] * len(keys))
        handles = ffi.new("VkDescriptorSet[]", len(keys))
        ctx.check(lib.vkAllocateDescriptorSets(ctx.device, new(
            "VkDescriptorSetAllocateInfo", sType=C.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            descriptorPool=self.pool, descriptorSetCount=len(keys), pSetLayouts=layouts), handles),
            "vkAllocateDescriptorSets")
        infos = ffi.new("VkDescriptorBufferInfo[]", [
            {"buffer": b.vk_buffer, "offset": 0, "range": WHOLE_SIZE} for bufs in keys.values() for b in bufs])
        writes = ffi.new("VkWriteDescriptorSet[]", [
            {"sType": C.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": handles[k], "dstBinding": j,
             "descriptorCount": 1, "descriptorType": C.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
             "pBufferInfo": infos + (k * N_BINDINGS + j)}
            for k in range(len(keys)) for j in range(N_BINDINGS)])
        lib.vkUpdateDescriptorSets(ctx.device, len(keys) * N_BINDINGS, writes, 0, NULL)
        return {key: handles[k] for k, key in enumerate(keys)}

    def _record(self, dispatches: list[Dispatch], sets: dict[tuple[int, ...], CData]) -> None:
        ctx = self.ctx
        cb = self.cb
        ctx.check(lib.vkBeginCommandBuffer(cb, new(
            "VkCommandBufferBeginInfo", sType=C.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            flags=C.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT)), "vkBeginCommandBuffer")
        compute = C.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
        shader_rw = C.VK_ACCESS_SHADER_READ_BIT | C.VK_ACCESS_SHADER_WRITE_BIT
        all_mem = shader_rw | C.VK_ACCESS_TRANSFER_READ_BIT | C.VK_ACCESS_TRANSFER_WRITE_BIT \
            | C.VK_ACCESS_HOST_READ_BIT | C.VK_ACCESS_HOST_WRITE_BIT
        every = compute | C.VK_PIPELINE_STAGE_TRANSFER_BIT | C.VK_PIPELINE_STAGE_HOST_BIT
        lead = new("VkMemoryBarrier", sType=C.VK_STRUCTURE_TYPE_MEMORY_BARRIER, srcAccessMask=all_mem,
                   dstAccessMask=shader_rw)
        lib.vkCmdPipelineBarrier(cb, every, compute, 0, 1, lead, 0, NULL, 0, NULL)
        qp = self.query_pool
        starts: dict[int, int] = {}
        ends: dict[int, int] = {}
        if qp is not None:  # timed: reset the queries, then stamp when everything before a run / its last is done
            lib.vkCmdResetQueryPool(cb, qp, 0, 2 * len(self.runs))
            starts = {first: 2 * r for r, (first, _) in enumerate(self.runs)}
            ends = {last: 2 * r + 1 for r, (_, last) in enumerate(self.runs)}
        stamp = C.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
        mid = new("VkMemoryBarrier", sType=C.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                  srcAccessMask=C.VK_ACCESS_SHADER_WRITE_BIT, dstAccessMask=shader_rw)
        layout = ctx.pipeline_layout
        bind_point = C.VK_PIPELINE_BIND_POINT_COMPUTE
        stage = C.VK_SHADER_STAGE_COMPUTE_BIT
        written: list[Range] = []
        read: list[Range] = []
        cur_pipe = cur_set = None
        for i, d in enumerate(dispatches):
            hazard = any(_overlaps(r, written) for r in d.reads) or \
                any(_overlaps(w, written) or _overlaps(w, read) for w in d.writes)
            if hazard:
                lib.vkCmdPipelineBarrier(cb, compute, compute, 0, 1, mid, 0, NULL, 0, NULL)
                self.n_barriers += 1
                self.barrier_before.append(i)
                written.clear()
                read.clear()
            written.extend(d.writes)
            read.extend(d.reads)
            if d.pipeline != cur_pipe:
                lib.vkCmdBindPipeline(cb, bind_point, d.pipeline)
                cur_pipe = d.pipeline
            ds = sets[d.set_key]
            if ds != cur_set:
                lib.vkCmdBindDescriptorSets(cb, bind_point, layout, 0, 1, ffi.new("VkDescriptorSet[]", [ds]), 0, NULL)
                cur_set = ds
            if d.push:
                lib.vkCmdPushConstants(cb, layout, stage, 0, len(d.push), d.push)
            if i in starts:
                lib.vkCmdWriteTimestamp(cb, stamp, qp, starts[i])
            lib.vkCmdDispatch(cb, *d.groups)
            if i in ends:
                lib.vkCmdWriteTimestamp(cb, stamp, qp, ends[i])
        tail = new("VkMemoryBarrier", sType=C.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                   srcAccessMask=C.VK_ACCESS_SHADER_WRITE_BIT, dstAccessMask=all_mem)
        lib.vkCmdPipelineBarrier(cb, compute, every, 0, 1, tail, 0, NULL, 0, NULL)
        ctx.check(lib.vkEndCommandBuffer(cb), "vkEndCommandBuffer")

    def free(self) -> None:
        ctx = self.ctx
        if self.cb is not None:
            ctx.free_command_buffer(self.cb)
            self.cb = None
        if self.pool is not None and not ctx.lost:
            lib.vkDestroyDescriptorPool(ctx.device, self.pool, NULL)
        self.pool = None
        if self.query_pool is not None and not ctx.lost:
            lib.vkDestroyQueryPool(ctx.device, self.query_pool, NULL)
        self.query_pool = None
        self._buffers.clear()
