#version 450
// Reductions: 0 SUM_ROWS, 1 MEAN, 2 ARGMAX (first index on ties, NaN above all) per row of a (f32); 4 SUM (f32 / f16 / bf16) and
// 5 COUNT_EQUAL (i32 a == b, i64 result) over the whole tensor as one row; 3 CUMSUM, one work group per row.
// A row of n elements takes G = u0 = ceil(n / SPAN) work groups, each thread reading at most CH elements: lavapipe
// (llvmpipe) ends a shader's loops after 65535 iterations in all, and a float running sum over millions of elements
// drops the small ones. PASS 0 (G = 1): the result at once; PASS 1: each group's partial (ARGMAX: value, index)
// into D (scratch); PASS 2: A = the partials, one group per row combines its G partials into the result.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TA = 0;  // SUM's source and result type (f32 / f16 / bf16)
layout(constant_id = 2) const uint PASS = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC
DEFINE_REDUCE(128u)
shared uint ri[128];
#define CH 1024u
#define SPAN (128u * CH)
#define NONE 0xffffffffu

uint n_of() { return OP >= 4u ? pc.ne00 * pc.ne01 * pc.ne02 * pc.ne03 : pc.ne00; }
uint rows_of() { return OP >= 4u ? 1u : pc.ne01 * pc.ne02 * pc.ne03; }
uint row_base(uint row) {
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    return pc.oa + r.x * pc.nb01 + r.y * pc.nb02 + r.z * pc.nb03;
}

// element i of the row at byte rb (OP 4, 5: the whole tensor, i in a's logical order)
float elem(uint rb, uint i) {
    if (OP < 4u) return A_f32[(rb + i * pc.nb00) >> 2];
    uvec4 c = coords(i, pc.ne00, pc.ne01, pc.ne02);
    uint oa = pc.oa + c.x * pc.nb00 + c.y * pc.nb01 + c.z * pc.nb02 + c.w * pc.nb03;
    if (OP == 4u) return A_ld(TA, oa);
    uint ob = pc.ob + c.x * pc.nb10 + c.y * pc.nb11 + c.z * pc.nb12 + c.w * pc.nb13;
    return A_i32[oa >> 2] == B_i32[ob >> 2] ? 1.0 : 0.0;
}

uint wg_sum_u(uint v) {
    uint t = gl_LocalInvocationID.x; ri[t] = v; barrier();
    for (uint s = 64u; s > 0u; s >>= 1) { if (t < s) ri[t] += ri[t + s]; barrier(); }
    uint r = ri[0]; barrier(); return r;
}

bool nan_f(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }
// x above y in ARGMAX's order: a NaN above every number (numpy's argmax takes the first NaN)
bool above(float x, float y) { return nan_f(x) ? !nan_f(y) : x > y; }
bool same(float x, float y) { return x == y || (nan_f(x) && nan_f(y)); }

// (value, index) of the first maximum over the work group; NONE: no element
void wg_argmax(inout float best, inout uint bi) {
    uint t = gl_LocalInvocationID.x;
    red[t] = best; ri[t] = bi; barrier();
    for (uint s = 64u; s > 0u; s >>= 1) {
        if (t < s) {
            float o = red[t + s]; uint oi = ri[t + s];
            if (oi != NONE && (ri[t] == NONE || above(o, red[t]) || (same(o, red[t]) && oi < ri[t]))) {
                red[t] = o; ri[t] = oi;
            }
        }
        barrier();
    }
    best = red[0]; bi = ri[0]; barrier();
}

void put(uint row, float s, uint count, uint bi) {
    if (OP == 4u) d_st(TA, pc.od, s);
    else if (OP == 5u) d_sti(T_I64, pc.od, int(count));
    else if (OP == 2u) d_i32[(pc.od >> 2) + row] = int(bi);
    else {
        uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
        d_f32[(pc.od + r.x * pc.nb1 + r.y * pc.nb2 + r.z * pc.nb3) >> 2] = OP == 1u ? s / float(pc.ne00) : s;
    }
}

void partial() {  // PASS 0 and 1
    uint t = gl_LocalInvocationID.x;
    uint G = PASS == 0u ? 1u : pc.u0;
    uint w = wg_id();
    uint row = w / G;
    if (row >= rows_of()) return;
    uint rb = OP < 4u ? row_base(row) : 0u;
    uint n = n_of();
    uint i0 = (w % G) * SPAN; uint i1 = min(n, i0 + SPAN);
    if (OP == 2u) {
        float best = NEG_INF; uint bi = NONE;
        for (uint i = i0 + t; i < i1; i += 128u) {
            float x = elem(rb, i);
            if (above(x, best) || bi == NONE) { best = x; bi = i; }
        }
        wg_argmax(best, bi);
        if (t != 0u) return;
        if (PASS == 0u) put(row, 0.0, 0u, bi);
        else { d_f32[(pc.od >> 2) + 2u * w] = best; d_i32[(pc.od >> 2) + 2u * w + 1u] = int(bi); }
        return;
    }
    float s = 0.0;
    for (uint i = i0 + t; i < i1; i += 128u) s += elem(rb, i);
    s = wg_sum(s);  // COUNT_EQUAL: a count of at most SPAN, exact in a float
    if (t != 0u) return;
    if (PASS == 0u) put(row, s, uint(s), 0u);
    else if (OP == 5u) d_i32[(pc.od >> 2) + w] = int(s);
    else d_f32[(pc.od >> 2) + w] = s;
}

void combine() {  // PASS 2: A holds rows * G partials
    uint t = gl_LocalInvocationID.x;
    uint G = pc.u0;
    uint row = wg_id();
    if (row >= rows_of()) return;
    uint p0 = (pc.oa >> 2) + (OP == 2u ? 2u : 1u) * row * G;
    if (OP == 2u) {
        float best = NEG_INF; uint bi = NONE;
        for (uint k = t; k < G; k += 128u) {
            float x = A_f32[p0 + 2u * k]; uint xi = uint(A_i32[p0 + 2u * k + 1u]);
            if (xi != NONE && (bi == NONE || above(x, best))) { best = x; bi = xi; }
        }
        wg_argmax(best, bi);
        if (t == 0u) put(row, 0.0, 0u, bi);
    } else if (OP == 5u) {
        uint c = 0u;
        for (uint k = t; k < G; k += 128u) c += uint(A_i32[p0 + k]);
        c = wg_sum_u(c);
        if (t == 0u) put(row, 0.0, c, 0u);
    } else {
        float s = 0.0;
        for (uint k = t; k < G; k += 128u) s += A_f32[p0 + k];
        s = wg_sum(s);
        if (t == 0u) put(row, s, 0u, 0u);
    }
}

void main() {
    if (OP != 3u) {
        if (PASS == 2u) combine();
        else partial();
        return;
    }
    // CUMSUM (rows of at most 2^21 elements, see ops/reduce.py): each thread scans a contiguous chunk
    uint t = gl_LocalInvocationID.x;
    uint row = wg_id();
    if (row >= pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    uint base = pc.oa + r.x * pc.nb01 + r.y * pc.nb02 + r.z * pc.nb03;
    uint dbase = pc.od + r.x * pc.nb1 + r.y * pc.nb2 + r.z * pc.nb3;
    uint n = pc.ne00;
    uint chunk = (n + 127u) / 128u;
    uint i0 = min(n, t * chunk); uint i1 = min(n, i0 + chunk);
    float s = 0.0;
    for (uint i = i0; i < i1; ++i) s += A_f32[(base + i * pc.nb00) >> 2];
    red[t] = s; barrier();
    if (t == 0u) { float acc = 0.0; for (uint k = 0u; k < 128u; ++k) { float x = red[k]; red[k] = acc; acc += x; } }
    barrier();
    float run = red[t];
    for (uint i = i0; i < i1; ++i) { run += A_f32[(base + i * pc.nb00) >> 2]; d_f32[(dbase + i * pc.nb0) >> 2] = run; }
}
