// Quantisation of 32-element blocks to ggml's legacy block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), byte for byte as
// ggml's reference quantisers: f32 arithmetic with one rounding per operation (`precise`: no fused multiply-add),
// divisions rounded to nearest even in integer arithmetic (drivers may divide through an approximate reciprocal),
// scales stored as f16 rounded to nearest even, Q8_0 rounding half away from zero, the 4/5-bit types truncating
// x + 8.5 (x + 16.5, x + 0.5). Include after DECLARE_DST: blocks are written through d_u16.

float X[256];  // the values of the block being quantised (per invocation)

// a / b rounded to nearest even (finite a, finite non-zero b), subnormal results included
float div_rn(float a, float b) {
    uint ua = floatBitsToUint(a); uint ub = floatBitsToUint(b);
    uint sign = (ua ^ ub) & 0x80000000u;
    ua &= 0x7fffffffu; ub &= 0x7fffffffu;
    if (ua == 0u) return uintBitsToFloat(sign);
    int ea = int(ua >> 23); int eb = int(ub >> 23);
    uint ma = ua & 0x7fffffu; uint mb = ub & 0x7fffffu;
    if (ea == 0) { ea = 1; while ((ma & 0x800000u) == 0u) { ma <<= 1; ea--; } } else ma |= 0x800000u;
    if (eb == 0) { eb = 1; while ((mb & 0x800000u) == 0u) { mb <<= 1; eb--; } } else mb |= 0x800000u;
    int e = ea - eb + 127;
    if (ma < mb) { ma <<= 1; e--; }
    uint q = 0u; uint r = ma;  // 26 quotient bits of ma / mb in [1, 2): q in [2^25, 2^26)
    for (int i = 0; i < 26; ++i) {
        q <<= 1;
        if (r >= mb) { r -= mb; q |= 1u; }
        r <<= 1;
    }
    bool sticky = r != 0u;
    if (e <= 0) {  // subnormal: denormalise before rounding
        uint sh = uint(1 - e);
        if (sh > 26u) { sticky = sticky || q != 0u; q = 0u; }
        else { sticky = sticky || (q & ((1u << sh) - 1u)) != 0u; q >>= sh; }
        e = 0;
    }
    uint mant = q >> 2;
    sticky = sticky || (q & 1u) != 0u;
    if ((q & 2u) != 0u && (sticky || (mant & 1u) != 0u)) mant++;
    if (e == 0) return uintBitsToFloat(sign | mant);  // a carry into bit 23 makes it the smallest normal
    if (mant == 0x1000000u) { mant >>= 1; e++; }
    if (e >= 255) return uintBitsToFloat(sign | 0x7f800000u);
    return uintBitsToFloat(sign | (uint(e) << 23) | (mant & 0x7fffffu));
}

// the f16 bits of v, rounded to nearest even (NaN -> quiet 0x7e00 with v's sign, as ggml's converter)
uint f16_bits(float v) {
    uint u = floatBitsToUint(v);
    uint s = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return s | 0x7e00u;
    if (a >= 0x477ff000u) return s | 0x7c00u;
    if (a >= 0x38800000u) {
        uint r = a - 0x38000000u;
        return s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
    }
    if (a < 0x33000000u) return s;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint sh = 126u - (a >> 23);
    uint q = m >> sh; uint rem = m & ((1u << sh) - 1u); uint half_ = 1u << (sh - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q++;
    return s | q;
}

// C roundf: half away from zero
float round_away(float v) {
    precise float a = abs(v);
    precise float f = floor(a);
    precise float r = f + (a - f >= 0.5 ? 1.0 : 0.0);
    return v < 0.0 ? -r : r;
}

// pyggml's rule for a block holding a NaN or an infinity (pyggml.quants.nan_block, docs/op-semantics.md): when
// X[0 .. blck(t)) holds one, the block of type t at byte offset o becomes zeros with NaN (f16 0x7e00) in its scale
// fields (d, then m or dmin in the next f16 where the type has one), and true is returned; else nothing is written.
// The exponent bits are tested, so no float comparison or conversion sees the non-finite value.
bool store_nan_block(uint t, uint o) {
    uint nonfinite = 0u;
    for (uint j = 0u; j < blck(t); ++j) nonfinite |= uint((floatBitsToUint(X[j]) & 0x7f800000u) == 0x7f800000u);
    if (nonfinite == 0u) return false;
    uint w = o >> 1;
    for (uint i = 0u; i < tsize(t) / 2u; ++i) d_u16[w + i] = uint16_t(0u);
    uint d_at = t == T_Q2_K ? 40u : t == T_Q3_K ? 54u : t == T_Q6_K ? 104u : 0u;  // in f16 words
    d_u16[w + d_at] = uint16_t(0x7e00u);
    bool has_min = t == T_Q4_1 || t == T_Q5_1 || t == T_Q2_K || t == T_Q4_K || t == T_Q5_K;
    if (has_min) d_u16[w + d_at + 1u] = uint16_t(0x7e00u);
    return true;
}

// quantise X[0..31] to type t and write the block at byte offset o of the destination
void store_q32(uint t, uint o) {
    uint w = o >> 1;
    uint q[32];
    bool offset_type = t == T_Q4_1 || t == T_Q5_1;
    float d;
    if (t == T_Q8_0) {
        float amax = 0.0;
        for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(X[j]));
        d = div_rn(amax, 127.0);
        float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
        for (uint j = 0u; j < 32u; ++j) {
            precise float v = X[j] * id;
            q[j] = uint(int(round_away(v))) & 0xffu;
        }
        d_u16[w] = uint16_t(f16_bits(d));
        for (uint j = 0u; j < 16u; ++j) d_u16[w + 1u + j] = uint16_t(q[2u * j] | (q[2u * j + 1u] << 8));
        return;
    }
    uint nmax = (t == T_Q4_0 || t == T_Q4_1) ? 15u : 31u;
    float mn = 0.0;
    if (offset_type) {
        mn = 3.402823466e38; float mx = -3.402823466e38;
        for (uint j = 0u; j < 32u; ++j) { if (X[j] < mn) mn = X[j]; if (X[j] > mx) mx = X[j]; }
        precise float range = mx - mn;
        d = div_rn(range, float(nmax));
    } else {
        float amax = 0.0; float mx = 0.0;
        for (uint j = 0u; j < 32u; ++j) { if (amax < abs(X[j])) { amax = abs(X[j]); mx = X[j]; } }
        d = div_rn(mx, t == T_Q4_0 ? -8.0 : -16.0);
    }
    float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
    float add = t == T_Q4_0 ? 8.5 : t == T_Q5_0 ? 16.5 : 0.5;
    uint qh = 0u;
    for (uint j = 0u; j < 32u; ++j) {
        precise float xs = X[j] - mn;
        precise float v = xs * id + add;
        int qi = int(v);
        q[j] = t == T_Q5_1 ? uint(qi) & 0xffu : uint(min(int(nmax), qi));
        qh |= ((q[j] >> 4) & 1u) << j;
    }
    d_u16[w++] = uint16_t(f16_bits(d));
    if (offset_type) d_u16[w++] = uint16_t(f16_bits(mn));
    if (t == T_Q5_0 || t == T_Q5_1) { d_u16[w++] = uint16_t(qh & 0xffffu); d_u16[w++] = uint16_t(qh >> 16); }
    for (uint j = 0u; j < 8u; ++j) {
        uint b0 = (q[2u * j] & 15u) | ((q[2u * j + 16u] & 15u) << 4);
        uint b1 = (q[2u * j + 1u] & 15u) | ((q[2u * j + 17u] & 15u) << 4);
        d_u16[w + j] = uint16_t(b0 | (b1 << 8));
    }
}
