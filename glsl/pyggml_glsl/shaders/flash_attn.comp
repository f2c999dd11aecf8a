#version 450
// FLASH_ATTN_EXT, one work group per (query row, head, batch): scores for WG keys at a time, online softmax
// (running max and sum), V accumulated per thread over its own output dims. GQA: kv head = h / (H / kH).
// Decode at long contexts, where the (query row, head, batch) triples are too few to fill a device, splits the keys
// (pyggml_glsl.ops.attention.n_split): MODE 1 gives each split a work group that writes its record (max, sum,
// Dv unnormalised values) to d, MODE 2 (one work group per row, the records bound as Q) joins them.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WGS 64u
#define MAXD 640u
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TK = 1;
layout(constant_id = 1) const uint TV = 1;
layout(constant_id = 2) const uint TM = 1;
layout(constant_id = 3) const uint HAS_MASK = 0;
layout(constant_id = 4) const uint HAS_SINK = 0;
layout(constant_id = 5) const uint MODE = 0;  // 0: whole rows; 1: a split's record; 2: the records joined
DECLARE_SRC(0, Q)
DECLARE_SRC(1, K)
DECLARE_SRC(2, V)
DECLARE_SRC(3, M)
DECLARE_SRC(4, S)
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint oq, ok, ov, om, os, od;
    uint Dk, Dv, nq, H;
    uint qnb1, qnb2, qnb3;
    uint nkv, kHB, B;       // kHB: kv heads | kv batches << 16
    uint knb1, knb2, knb3;
    uint vnb1, vnb2, vnb3;
    uint mnb1, mnb2, mnb3, mHB;  // mHB: mask dims 2 | 3 << 16
    float scale, softcap, m0, m1; uint n_head_log2;
    uint n_split;           // MODE 1 and 2: splits of the keys
} pc;
shared float qv[MAXD];
shared float sc[WGS];
DEFINE_REDUCE(64u)

// LOOPS: lavapipe ends an invocation's loops after 65535 iterations in all, silently. A thread walks every key
// block of 64, and per block its key's dot product (Dk) and its output dims' sums over the block's keys (64 per 64
// dims of Dv); four steps per iteration (same order of the sums) take head size 128 from about 15,000 keys to about
// 45,000. Longer on a CPU-emulated device: refused (pyggml_glsl.ops.attention).

// key jj's share of output dim d: e^(s - max) v (a masked key: nothing)
float vterm(float s, float nm, uint vrow, uint d) {
    return s == NEG_INF ? 0.0 : exp(s - nm) * V_at(TV, vrow, d, tsize(TV));
}

// the output row orow (head h) from the maximum m, the sum l and the unnormalised values acc; the sink joins the
// softmax as one more score without a value
void finish(float m, float l, inout float acc[MAXD / WGS], uint h, uint orow, uint t) {
    if (HAS_SINK == 1u) {
        float sk = S_f32[(pc.os >> 2) + h];
        float nm = max(m, sk);
        float corr = m == NEG_INF ? 0.0 : exp(m - nm);
        l = l * corr + exp(sk - nm);
        for (uint r = 0u; r < MAXD / WGS; ++r) acc[r] *= corr;
    }
    float inv = l == 0.0 ? 0.0 : 1.0 / l;
    uint obase = (pc.od >> 2) + orow * pc.Dv;
    for (uint r = 0u; r < MAXD / WGS; ++r) {
        uint d = t + r * WGS;
        if (d < pc.Dv) d_f32[obase + d] = acc[r] * inv;
    }
}

// MODE 2: row orow's n_split records (at Q's offset) scaled from their maxima to the largest and summed (a record
// whose keys were all masked adds nothing)
void merge(uint h, uint orow, uint t) {
    uint rl = pc.Dv + 2u;
    uint rb = (pc.oq >> 2) + orow * pc.n_split * rl;
    float m = NEG_INF;
    for (uint sp = 0u; sp < pc.n_split; ++sp) m = max(m, Q_f32[rb + sp * rl]);
    float l = 0.0;
    float acc[MAXD / WGS];
    for (uint r = 0u; r < MAXD / WGS; ++r) acc[r] = 0.0;
    for (uint sp = 0u; sp < pc.n_split; ++sp) {
        uint o = rb + sp * rl;
        if (Q_f32[o] == NEG_INF) continue;
        float f = exp(Q_f32[o] - m);
        l += Q_f32[o + 1u] * f;
        for (uint r = 0u; r < MAXD / WGS; ++r) {
            uint d = t + r * WGS;
            if (d < pc.Dv) acc[r] += Q_f32[o + 2u + d] * f;
        }
    }
    finish(m, l, acc, h, orow, t);
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint ns = MODE == 1u ? pc.n_split : 1u;
    uint wid = wg_id() / ns; uint sp = wg_id() % ns;
    uvec4 w = coords(wid, pc.H, pc.nq, 1u << 30);
    uint h = w.x; uint iq = w.y; uint b = w.z;
    if (wid >= pc.H * pc.nq * pc.B) return;
    uint orow = (b * pc.nq + iq) * pc.H + h;
    if (MODE == 2u) {
        merge(h, orow, t);
        return;
    }
    uint chunks = (pc.nkv + WGS - 1u) / WGS;
    uint jb = chunks * sp / ns * WGS;
    uint je = min(pc.nkv, chunks * (sp + 1u) / ns * WGS);
    uint kH = pc.kHB & 0xffffu; uint kB = pc.kHB >> 16;
    uint kh = h / (pc.H / kH);
    uint qbase = pc.oq + iq * pc.qnb1 + h * pc.qnb2 + b * pc.qnb3;
    for (uint d = t; d < pc.Dk; d += WGS) qv[d] = Q_f32[(qbase >> 2) + d];
    barrier();
    uint kb = b / (pc.B / kB);
    uint kbase = pc.ok + kh * pc.knb2 + kb * pc.knb3;
    uint vbase = pc.ov + kh * pc.vnb2 + kb * pc.vnb3;
    uint mbase = pc.om + iq * pc.mnb1 + (h % (pc.mHB & 0xffffu)) * pc.mnb2 + (b % (pc.mHB >> 16)) * pc.mnb3;
    float slope = 1.0;
    if (pc.m0 != 0.0) {
        slope = h < pc.n_head_log2 ? pow(pc.m0, float(h + 1u)) : pow(pc.m1, float(2u * (h - pc.n_head_log2) + 1u));
    }
    float acc[MAXD / WGS];
    for (uint r = 0u; r < MAXD / WGS; ++r) acc[r] = 0.0;
    float m = NEG_INF;
    float l = 0.0;
    for (uint j0 = jb; j0 < je; j0 += WGS) {
        uint j = j0 + t;
        float s = NEG_INF;
        if (j < je) {
            uint krow = kbase + j * pc.knb1;
            float dot = 0.0;
            uint d = 0u;
            for (; d + 4u <= pc.Dk; d += 4u) {  // four per iteration: see LOOPS below
                dot += qv[d] * K_at(TK, krow, d, tsize(TK));
                dot += qv[d + 1u] * K_at(TK, krow, d + 1u, tsize(TK));
                dot += qv[d + 2u] * K_at(TK, krow, d + 2u, tsize(TK));
                dot += qv[d + 3u] * K_at(TK, krow, d + 3u, tsize(TK));
            }
            for (; d < pc.Dk; ++d) dot += qv[d] * K_at(TK, krow, d, tsize(TK));
            s = dot * pc.scale;
            if (pc.softcap != 0.0) s = pc.softcap * tanh(s / pc.softcap);
            if (HAS_MASK == 1u) {
                float mv = M_ld(TM, mbase + j * tsize(TM));
                s = mv == NEG_INF ? NEG_INF : s + slope * mv;
            }
        }
        sc[t] = s;
        // a NaN score counts as +inf in the maximum (max() may pass it over): the row's sum and values turn NaN, as
        // ggml's, also in a split whose every key it sees is NaN (a record with maximum -inf would be dropped)
        float bm = wg_max(isnan(s) ? uintBitsToFloat(0x7f800000u) : s);
        float nm = max(m, bm);
        float corr = m == NEG_INF ? 0.0 : exp(m - nm);
        float p = s == NEG_INF ? 0.0 : exp(s - nm);
        float ps = wg_sum(p);
        l = l * corr + ps;
        uint nj = min(WGS, je - j0);
        for (uint r = 0u; r < MAXD / WGS; ++r) {
            uint d = t + r * WGS;
            if (d >= pc.Dv) break;
            float a = acc[r] * corr;
            uint jj = 0u;
            for (; jj + 4u <= nj; jj += 4u) {
                a += vterm(sc[jj], nm, vbase + (j0 + jj) * pc.vnb1, d);
                a += vterm(sc[jj + 1u], nm, vbase + (j0 + jj + 1u) * pc.vnb1, d);
                a += vterm(sc[jj + 2u], nm, vbase + (j0 + jj + 2u) * pc.vnb1, d);
                a += vterm(sc[jj + 3u], nm, vbase + (j0 + jj + 3u) * pc.vnb1, d);
            }
            for (; jj < nj; ++jj) a += vterm(sc[jj], nm, vbase + (j0 + jj) * pc.vnb1, d);
            acc[r] = a;
        }
        m = nm;
        barrier();
    }
    if (MODE == 0u) {
        finish(m, l, acc, h, orow, t);
        return;
    }
    uint rb = (pc.od >> 2) + (orow * ns + sp) * (pc.Dv + 2u);
    if (t == 0u) {
        d_f32[rb] = m;
        d_f32[rb + 1u] = l;
    }
    for (uint r = 0u; r < MAXD / WGS; ++r) {
        uint d = t + r * WGS;
        if (d < pc.Dv) d_f32[rb + 2u + d] = acc[r];
    }
}
