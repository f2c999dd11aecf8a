"""Recipes of layout, index and reduction ops: CONT of a transpose or permute, views at offsets, reshapes, DUP,
CONCAT, PAD, ROLL, REPEAT_BACK, DIAG, TRI, GET_ROWS, ADD_ID, ADD_REL_POS, and the reductions (SUM_ROWS and MEAN stay
in the pool; SUM, ARGMAX, COUNT_EQUAL, ARGSORT, TOP_K end a branch or feed GET_ROWS)."""

from __future__ import annotations

from pyggml import ops
from pyggml_testing.alloc_twin.elementwise import sum_of
from pyggml_testing.alloc_twin.ggml import Twin
from pyggml_testing.alloc_twin.pool import MAX_ELEMENTS, Pool


def transpose(g: Pool, a: Twin) -> Twin | None:
    if a.py.ne[2] > 1 and g.chance(0.5):
        v = g.both(ops.permute(a.py, 0, 2, 1, 3), "permute", a, 0, 2, 1, 3, pool=False, nodes=0)
    else:
        v = g.both(ops.transpose(a.py), "transpose", a, pool=False, nodes=0)
    return g.both(ops.cont(v.py), "cont", v, nodes=2)


def view(g: Pool, a: Twin) -> Twin | None:
    """Rows first..first+n of a 2-D tensor, a flat run of elements (contiguous views at an offset), or a 4-D
    view of a 3-D tensor that nothing reads (it keeps a alive to the end)."""
    ne, rng = a.py.ne, g.rng
    r = rng.random()
    if ne[2] == 1 and ne[1] > 1 and r < 0.5:
        first = int(rng.integers(0, ne[1]))
        n, nb1 = int(rng.integers(1, ne[1] - first + 1)), a.py.nb[1]
        return g.both(ops.view(a.py, (ne[0], n), (nb1,), first * nb1), "view_2d", a, ne[0], n, nb1, first * nb1)
    if ne[2] % 2 == 0 and r < 0.7:
        _, nb1, nb2, _ = a.py.nb
        ne4 = (ne[0], ne[1], ne[2] // 2, 2)
        return g.both(ops.view(a.py, ne4, (nb1, nb2, nb2 * ne4[2])), "view_4d", a, *ne4, nb1, nb2, nb2 * ne4[2], 0,
                      pool=False)
    total = a.py.nelements()
    first = int(rng.integers(0, total))
    n = int(rng.integers(1, total - first + 1))
    return g.both(ops.view(a.py, (n,), offset=first * 4), "view_1d", a, n, first * 4)


def reshape(g: Pool, a: Twin) -> Twin | None:
    """RESHAPE, or CONT/DUP into a new shape."""
    n0, n1, n2, _ = a.py.ne
    shapes: list[tuple[int, ...]] = [(n0 * n1 * n2,), (n0 * n1, n2), (n0, n1 * n2)]
    if n1 % 2 == 0:
        shapes.append((n0, n1 // 2, 2 * n2))
    ne = g.choice(shapes)
    r = g.rng.random()
    if r < 0.2 and len(ne) > 1:
        return g.both(ops.cont(a.py, *ne), f"cont_{len(ne)}d", a, *ne)
    if r < 0.3:
        return g.both(ops.dup(a.py), "dup", a)
    return g.both(ops.reshape(a.py, *ne), f"reshape_{len(ne)}d", a, *ne)


def shape_ops(g: Pool, a: Twin) -> Twin | None:
    """CONCAT, PAD (also at the front), ROLL, REPEAT_BACK, DIAG, TRI, ADD_REL_POS."""
    ne, rng = a.py.ne, g.rng
    r = rng.random()
    if r < 0.25:
        dim = int(rng.integers(0, 3))
        if 2 * a.py.nelements() > MAX_ELEMENTS:
            return None
        bne = list(ne)
        bne[dim] = g.choice((1, 2, ne[dim]))
        b = g.operand(tuple(bne))
        return g.both(ops.concat(a.py, b.py, dim), "concat", a, b, dim)
    if r < 0.4:
        lp, rp = (int(rng.integers(0, 2)), 0, 0, 0), (int(rng.integers(0, 3)), int(rng.integers(0, 2)), 0, 0)
        if lp[0]:
            both_ends = (x for pair in zip(lp, rp, strict=True) for x in pair)  # lp0, rp0, lp1, rp1, ...
            return g.both(ops.pad_ext(a.py, lp, rp), "pad_ext", a, *both_ends)
        return g.both(ops.pad(a.py, *rp), "pad", a, *rp)
    if r < 0.55:
        s = (int(rng.integers(1 - ne[0], ne[0])), int(rng.integers(1 - ne[1], ne[1])), 0, 0)
        return g.both(ops.roll(a.py, *s), "roll", a, *s)
    if r < 0.7:
        if ne[1] % 2:
            return None
        _, nb1, nb2, _ = a.py.nb
        like = g.both(ops.view(a.py, (ne[0], ne[1] // 2, ne[2]), (nb1, nb2)), "view_3d", a, ne[0], ne[1] // 2, ne[2],
                      nb1, nb2, 0, pool=False)
        return g.both(ops.repeat_back(a.py, like.py), "repeat_back", a, like)
    if r < 0.8:
        if ne[1] != 1 or ne[0] * ne[0] * ne[2] > MAX_ELEMENTS:
            return None
        return g.both(ops.diag(a.py), "diag", a)
    if r < 0.9:
        if ne[0] != ne[1]:
            return None
        tt = g.choice(list(ops.TriType))
        return g.both(ops.tri(a.py, tt), "tri", a, tt.value)
    k = {4: 2, 16: 4, 64: 8, 256: 16}.get(ne[0])
    if k is None:
        return None
    # pw, ph [k, qw, qh, n] with qw = ne[1], qh = 1, n = ne[2]
    pw, ph = (g.leaf((k, ne[1], 1, ne[2]), ("const", "weight"), (0.5, 0.5)) for _ in range(2))
    inplace = g.chance(0.3)
    return g.both(ops.add_rel_pos(a.py, pw.py, ph.py, inplace=inplace),
                  f"add_rel_pos{'_inplace' if inplace else ''}", a, pw, ph)


def rows(g: Pool, a: Twin) -> Twin | None:
    """GET_ROWS of a (row indices from an input or from ARGMAX), ADD_ID over a."""
    ne, rng = a.py.ne, g.rng
    if rng.random() < 0.6:
        n = int(rng.integers(1, 9))
        if n * ne[0] * ne[2] > MAX_ELEMENTS:
            return None
        src = g.peer(a, (ne[1], ne[1], 1, 1)) if ne[2] == 1 and ne[1] > 1 and g.chance(0.3) else None
        if src is not None:
            ids = g.both(ops.argmax(src.py), "argmax", src, pool=False)  # indices below ne[1]
        else:
            ids = g.ids((n, ne[2]), ne[1])
        return g.both(ops.get_rows(a.py, ids.py), "get_rows", a, ids)
    n_exp = int(rng.integers(1, 5))
    b = g.leaf((ne[0], n_exp), ("weight", "const"), (0.8, 0.2))
    ids = g.ids((ne[1], ne[2]), n_exp)
    return g.both(ops.add_id(a.py, b.py, ids.py), "add_id", a, b, ids)


def reduce(g: Pool, a: Twin) -> Twin | None:
    ne, r = a.py.ne, g.rng.random()
    if r < 0.4:
        name = g.choice(("sum_rows", "mean"))
        return g.both(getattr(ops, name)(a.py), name, a)
    if r < 0.55:
        return sum_of(g, a)
    if r < 0.8 and ne[2] == 1:
        x = g.both(ops.argmax(a.py), "argmax", a, pool=False)
        if r < 0.65:
            return x
        y = g.ids((ne[1],), ne[0])
        return g.both(ops.count_equal(x.py, y.py), "count_equal", x, y, pool=False)
    if g.chance(0.5):
        order = g.choice(list(ops.SortOrder))
        return g.both(ops.argsort(a.py, order), "argsort", a, order.value, pool=False)
    k = int(g.rng.integers(1, ne[0] + 1))
    return g.both(ops.top_k(a.py, k), "top_k", a, k, pool=False)
