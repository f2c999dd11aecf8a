"""Looking at a plan: text (PYGGML_SCHED_DEBUG=1: splits and inputs; =2: every node with backend, cause and use
count), Graphviz DOT (a cluster per split, nodes coloured by backend, copies dashed) and a self-drawn SVG (one lane
per backend, nodes in execution order, split boundaries, copy arrows)."""

from __future__ import annotations

from html import escape

from pyggml.backend.sched.splits import SplitPlan
from pyggml.backend.sched.table import BackendTable
from pyggml.ops.base import VIEW_OPS
from pyggml.tensor import Tensor

PALETTE = ("#8ecae6", "#ffb703", "#90be6d", "#f28482", "#cdb4db", "#f9c74f", "#84a59d", "#ffafcc",
           "#a3c4f3", "#e9c46a", "#b5e48c", "#f4a261", "#bde0fe", "#ffc8dd", "#caffbf", "#dddddd")


def color(b: int) -> str:
    return PALETTE[b % len(PALETTE)] if b >= 0 else "#ffffff"


def _size(t: Tensor) -> str:
    return _bytes(t.nbytes())


def _bytes(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _where(tab: BackendTable, plan: SplitPlan, t: Tensor) -> str:
    b = plan.backend_of.get(id(t), -1)
    name = tab.backends[b].name if b >= 0 else "?"
    return f"[{name} {plan.cause.get(id(t), '')}]".replace(" ]", "]")


def format_plan(tab: BackendTable, plan: SplitPlan, level: int = 1) -> str:
    g = plan.graph
    lines = [f"scheduler: graph {g.uid}, {plan.n_nodes} nodes, {plan.n_leafs} leafs -> {len(plan.splits)} splits, "
             f"{plan.n_split_inputs} inputs copied ({_bytes(plan.split_input_bytes)}) per compute; "
             f"backends {tab.names()}"]
    for si, split in enumerate(plan.splits):
        name = tab.backends[split.backend_id].name
        ins = " ".join(f"{t.name} ({_size(t)}) from {tab.backends[ib].name}"
                       for t, ib in zip(split.inputs, split.input_backends, strict=True))
        waits = f" waits for {', '.join(tab.backends[w].name for w in split.wait_for)}" if split.wait_for else ""
        lines.append(f"## split {si}: {name}, nodes [{split.i_start}, {split.i_end}), {split.n_inputs} inputs"
                     f"{': ' + ins if ins else ''}{waits}")
        if level < 2:
            continue
        for i in range(split.i_start, split.i_end):
            t = g.nodes[i]
            srcs = " ".join(f"{s.name} {_where(tab, plan, s)}" for s in t.src if s is not None)
            lines.append(f"node {i:5d} {t.op.name:>14s} {t.name:<28s} {_size(t):>10s} {_where(tab, plan, t)} "
                         f"use={g.use_count(t)}: {srcs}")
    if level >= 2:
        for i, t in enumerate(g.leafs):
            lines.append(f"leaf {i:5d} {'NONE':>14s} {t.name:<28s} {_size(t):>10s} {_where(tab, plan, t)} "
                         f"use={g.use_count(t)}")
    return "\n".join(lines)


def _dot_label(t: Tensor, extra: str = "") -> str:
    name = t.name.replace("\\", "/").replace('"', "'")
    return f"{t.op.name}\\n{name}\\n{t.type} {list(t.ne)}{extra}"


def to_dot(tab: BackendTable, plan: SplitPlan) -> str:
    g = plan.graph
    ids: dict[int, str] = {}
    out = ["digraph sched {", "  rankdir=TB; compound=true;",
           '  node [shape=box, style="filled,rounded", fontname="monospace", fontsize=9];']
    for i, t in enumerate(g.leafs):
        ids[id(t)] = f"l{i}"
        b = plan.backend_of.get(id(t), -1)
        out.append(f'  l{i} [shape=note, fillcolor="{color(b)}", label="{_dot_label(t)}"];')
    for si, split in enumerate(plan.splits):
        b = split.backend_id
        out.append(f"  subgraph cluster_s{si} {{")
        out.append(f'    label="split {si}: {tab.backends[b].name} ({split.n_inputs} inputs)"; '
                   f'color="{color(b)}"; penwidth=2;')
        for k, cps in enumerate(split.input_copies):
            cp = cps[plan.slot]
            ids[id(cp)] = f"c{si}_{k}"
            out.append(f'    c{si}_{k} [style="filled,dashed", fillcolor="{color(b)}", '
                       f'label="copy\\n{cp.name.replace(chr(34), chr(39))}"];')
        for i in range(split.i_start, split.i_end):
            t = g.nodes[i]
            ids[id(t)] = f"n{i}"
            shape = ", shape=ellipse" if t.op in VIEW_OPS else ""
            out.append(f'    n{i} [fillcolor="{color(plan.backend_of.get(id(t), -1))}"{shape}, '
                       f'label="{_dot_label(t, chr(92) + "n" + plan.cause.get(id(t), ""))}"];')
        out.append("  }")
    for split in plan.splits:
        for src, cps in zip(split.inputs, split.input_copies, strict=True):
            if id(src) in ids:
                out.append(f'  {ids[id(src)]} -> {ids[id(cps[plan.slot])]} [style=dashed, color="#d62828"];')
    for t in g.nodes:
        for s in t.src:
            if s is not None and id(s) in ids:
                out.append(f"  {ids[id(s)]} -> {ids[id(t)]};")
    out.append("}")
    return "\n".join(out)


def to_svg(tab: BackendTable, plan: SplitPlan) -> str:
    """Lanes (one per backend) x rows (execution order): every node and input copy is a box in its backend's lane;
    a dashed line marks each split boundary; a red arrow runs from a copied tensor to its copy."""
    g = plan.graph
    lane_w, row_h, left, top = 240, 18, 70, 40
    rows: list[tuple[int, Tensor, bool]] = []  # (backend, tensor, is_copy)
    row_of: dict[int, int] = {}
    bounds: list[tuple[int, int]] = []
    arrows: list[tuple[int, int, int, int]] = []  # (src lane, src row, dst lane, dst row)
    for si, split in enumerate(plan.splits):
        bounds.append((len(rows), si))
        for src, cps, ib in zip(split.inputs, split.input_copies, split.input_backends, strict=True):
            r = len(rows)
            rows.append((split.backend_id, cps[plan.slot], True))
            arrows.append((ib, row_of.get(id(src), r), split.backend_id, r))
        for i in range(split.i_start, split.i_end):
            t = g.nodes[i]
            row_of[id(t)] = len(rows)
            rows.append((plan.backend_of.get(id(t), -1), t, False))
    width = left + lane_w * tab.n + 20
    height = top + row_h * len(rows) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="10">',
           '<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
           '<path d="M0,0 L8,4 L0,8 z" fill="#d62828"/></marker></defs>',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for b, be in enumerate(tab.backends):
        x = left + b * lane_w
        out.append(f'<rect x="{x}" y="{top - 8}" width="{lane_w - 8}" height="{height - top - 4}" '
                   f'fill="{color(b)}" fill-opacity="0.15"/>')
        out.append(f'<text x="{x + 4}" y="{top - 14}" font-weight="bold">{escape(be.name)}</text>')
    for r0, si in bounds:
        y = top + r0 * row_h - 4
        out.append(f'<line x1="4" y1="{y}" x2="{width - 4}" y2="{y}" stroke="#555" stroke-dasharray="4,3"/>')
        out.append(f'<text x="6" y="{y + 12}">split {si}</text>')
    for r, (b, t, is_copy) in enumerate(rows):
        x = left + max(b, 0) * lane_w + 4
        y = top + r * row_h
        dash = ' stroke-dasharray="3,2"' if is_copy else ""
        fill = "#ffffff" if t.op in VIEW_OPS else color(b)
        label = t.name if is_copy else f"{t.op.name} {t.name}"
        out.append(f'<rect x="{x}" y="{y}" width="{lane_w - 16}" height="{row_h - 3}" fill="{fill}" '
                   f'stroke="#333" stroke-width="0.6"{dash}><title>{escape(label)}</title></rect>')
        out.append(f'<text x="{x + 3}" y="{y + row_h - 7}">{escape(label[:36])}</text>')
    for sb, sr, db, dr in arrows:
        x1 = left + sb * lane_w + (lane_w - 12 if db > sb else 4)
        y1 = top + sr * row_h + row_h // 2
        x2 = left + db * lane_w + (4 if db > sb else lane_w - 12)
        y2 = top + dr * row_h + row_h // 2
        out.append(f'<path d="M{x1},{y1} L{x2},{y2}" stroke="#d62828" fill="none" marker-end="url(#arr)"/>')
    out.append("</svg>")
    return "\n".join(out)
