#version 450
// ARGSORT / TOP_K: a bitonic sort of (value, index) pairs per row, padded to np (a power of two) with pairs that
// sort last; ties keep index order (stable, as the reference); NaN is above every number. Rows of up to CHUNK elements are sorted in shared
// memory by one work group each (MODE 0). Longer rows go through scratch memory (8 bytes per pair):
// MODE 1 sorts each CHUNK of a row in shared memory (every stage k <= CHUNK), then for each k = 2 CHUNK .. np:
// MODE 2 runs one compare-exchange stage (kk, jj >= CHUNK) over the scratch, MODE 3 the stages jj < CHUNK of kk in
// shared memory (with `last`, reading the scratch through binding 1 and writing the indices out).
// The output row keeps the first k_out indices (ARGSORT: all, TOP_K: k).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 256u
#define CHUNK 2048u
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ORDER = 0;  // 0 ascending, 1 descending
layout(constant_id = 1) const uint MODE = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint oa, od, os;             // source values, output indices (or scratch), scratch byte offsets
    uint n, np, k_out;           // row length, padded length, outputs per row
    uint ne01, ne02, nrows;
    uint nb00, nb01, nb02, nb03;  // source strides
    uint nb0, nb1, nb2, nb3;      // output strides
    uint kk, jj, last;           // the stage (MODE 2 and 3)
} pc;

shared float sv[CHUNK];
shared uint si[CHUNK];

bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }

// NaN sorts above every number (+inf included), NaNs tie (index order), as numpy's sort
bool before(float va, uint ia, float vb, uint ib) {
    if (ia >= pc.n) return false;
    if (ib >= pc.n) return true;
    bool an = is_nan(va); bool bn = is_nan(vb);
    if (an != bn) return ORDER == 0u ? bn : an;
    if (!an && va != vb) return ORDER == 0u ? va < vb : va > vb;
    return ia < ib;
}

// compare-exchange of shared slots l < m, ascending (in `before` order) when up
void cmpx(uint l, uint m, bool up) {
    float vl = sv[l]; uint il = si[l]; float vm = sv[m]; uint im = si[m];
    if (up ? before(vm, im, vl, il) : before(vl, il, vm, im)) { sv[l] = vm; si[l] = im; sv[m] = vl; si[m] = il; }
}

// the stages (k, j) of the network for k in [k0, k1] and j < min(k, jmax) over `len` shared slots whose first has
// global index g0
void local_stages(uint len, uint g0, uint k0, uint k1, uint jmax) {
    uint t = gl_LocalInvocationID.x;
    for (uint k = k0; k <= k1; k <<= 1) {
        for (uint j = min(k, jmax) >> 1; j > 0u; j >>= 1) {
            for (uint p = t; p < len / 2u; p += WG) {
                uint l = (p / j) * 2u * j + p % j;
                cmpx(l, l + j, ((g0 + l) & k) == 0u);
            }
            barrier();
        }
    }
}

uint src_row(uint r) {
    uvec4 c = coords(r, pc.ne01, pc.ne02, 1u << 30);
    return pc.oa + c.x * pc.nb01 + c.y * pc.nb02 + c.z * pc.nb03;
}

uint dst_row(uint r) {
    uvec4 c = coords(r, pc.ne01, pc.ne02, 1u << 30);
    return pc.od + c.x * pc.nb1 + c.y * pc.nb2 + c.z * pc.nb3;
}

void load_src(uint row, uint g0, uint len) {
    uint base = src_row(row);
    for (uint l = gl_LocalInvocationID.x; l < len; l += WG) {
        uint g = g0 + l;
        sv[l] = g < pc.n ? A_f32[(base + g * pc.nb00) >> 2] : 0.0;
        si[l] = g;
    }
    barrier();
}

void write_out(uint row, uint g0, uint len) {
    uint base = dst_row(row);
    for (uint l = gl_LocalInvocationID.x; l < len; l += WG) {
        if (g0 + l < pc.k_out) d_i32[(base + (g0 + l) * pc.nb0) >> 2] = int(si[l]);
    }
}

uint pair_off(uint row, uint g) { return (pc.os >> 2) + 2u * (row * pc.np + g); }

void main() {
    uint w = wg_id();
    uint t = gl_LocalInvocationID.x;
    if (MODE == 0u) {
        if (w >= pc.nrows) return;
        load_src(w, 0u, pc.np);
        local_stages(pc.np, 0u, 2u, pc.np, pc.np);
        write_out(w, 0u, pc.np);
        return;
    }
    uint nch = pc.np / CHUNK;
    if (MODE == 2u) {
        uint p = w * WG + t;
        if (p >= pc.nrows * pc.np / 2u) return;
        uint row = p / (pc.np / 2u); uint q = p % (pc.np / 2u);
        uint l = (q / pc.jj) * 2u * pc.jj + q % pc.jj;
        uint ol = pair_off(row, l); uint om = pair_off(row, l + pc.jj);
        float vl = d_f32[ol]; uint il = uint(d_i32[ol + 1u]); float vm = d_f32[om]; uint im = uint(d_i32[om + 1u]);
        bool up = (l & pc.kk) == 0u;
        if (up ? before(vm, im, vl, il) : before(vl, il, vm, im)) {
            d_f32[ol] = vm; d_i32[ol + 1u] = int(im); d_f32[om] = vl; d_i32[om + 1u] = int(il);
        }
        return;
    }
    if (w >= pc.nrows * nch) return;
    uint row = w / nch; uint g0 = (w % nch) * CHUNK;
    if (MODE == 1u) {
        load_src(row, g0, CHUNK);
        local_stages(CHUNK, g0, 2u, CHUNK, CHUNK);
    } else {
        for (uint l = t; l < CHUNK; l += WG) {
            uint o = pair_off(row, g0 + l);
            if (pc.last != 0u) { sv[l] = B_f32[o]; si[l] = uint(B_i32[o + 1u]); }
            else { sv[l] = d_f32[o]; si[l] = uint(d_i32[o + 1u]); }
        }
        barrier();
        local_stages(CHUNK, g0, pc.kk, pc.kk, CHUNK);
        if (pc.last != 0u) { write_out(row, g0, CHUNK); return; }
    }
    for (uint l = t; l < CHUNK; l += WG) {
        uint o = pair_off(row, g0 + l);
        d_f32[o] = sv[l]; d_i32[o + 1u] = int(si[l]);
    }
}
