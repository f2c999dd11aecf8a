// Quantisation of 256-element super-blocks to ggml's K types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), byte for byte as
// ggml's reference quantisers: the weighted least-squares scale searches (make_qkx2_quants, make_qx_quants with
// rmse type 1, make_q3_quants) in f32 with one rounding per operation (`precise`), divisions and the square root
// rounded to nearest even in integer arithmetic, nearest_int rounding half to even. Include after quant.glsl;
// the values are quant.glsl's X[0..255], the block is assembled in KB and written through d_u16.

int KL[256];
uint KB[210];
float KW[32];
int KLA[32];

int nearest_int(float v) { return int(roundEven(v)); }

// sqrt(x) rounded to nearest even (x >= 0): digit-by-digit integer square root of the 52-bit scaled mantissa
float sqrt_rn(float x) {
    uint u = floatBitsToUint(x);
    if (u == 0u || u >= 0x7f800000u) return x;
    int e = int(u >> 23); uint m = u & 0x7fffffu;
    if (e == 0) { e = 1; while ((m & 0x800000u) == 0u) { m <<= 1; e--; } } else m |= 0x800000u;
    int ex = e - 150;  // x = m * 2^ex
    uint hi; uint lo;
    if ((ex & 1) == 0) { hi = m >> 4; lo = m << 28; ex -= 28; } else { hi = m >> 5; lo = m << 27; ex -= 27; }
    uint q = 0u; uint r = 0u;  // sqrt(hi:lo) = q + fraction, q in [2^25, 2^26)
    for (int i = 0; i < 26; ++i) {
        int pos = 50 - 2 * i;
        uint two = pos >= 32 ? (hi >> uint(pos - 32)) & 3u : (lo >> uint(pos)) & 3u;
        r = (r << 2) | two;
        uint t = (q << 2) | 1u;
        if (r >= t) { r -= t; q = (q << 1) | 1u; } else q <<= 1;
    }
    uint mant = q >> 2;
    bool sticky = r != 0u || (q & 1u) != 0u;
    if ((q & 2u) != 0u && (sticky || (mant & 1u) != 0u)) mant++;
    int eb = ex / 2 + 152;
    if (mant == 0x1000000u) { mant >>= 1; eb++; }
    return uintBitsToFloat((uint(eb) << 23) | (mant & 0x7fffffu));
}

float h2f(uint h) { return unpackHalf2x16(h).x; }

float absmax16(float v[16]) {
    float amax = 0.0; float mx = 0.0;
    for (uint i = 0u; i < 16u; ++i) { if (abs(v[i]) > amax) { amax = abs(v[i]); mx = v[i]; } }
    return mx;
}

float signed_absmax(uint o, uint n) {
    float amax = 0.0; float mx = 0.0;
    for (uint i = 0u; i < n; ++i) { if (abs(X[o + i]) > amax) { amax = abs(X[o + i]); mx = X[o + i]; } }
    return mx;
}

// make_qkx2_quants over X[o .. o+n) with weights KW: KL[o ..] in [0, nmax]; returns the scale, -min in neg_min
float qkx2(uint o, uint n, int nmax, out float neg_min, float rmin, float rdelta, int nstep, bool use_mad) {
    float mn = X[o]; float mx = X[o];
    precise float sum_w = KW[0];
    precise float sum_x = sum_w * X[o];
    for (uint i = 1u; i < n; ++i) {
        if (X[o + i] < mn) mn = X[o + i];
        if (X[o + i] > mx) mx = X[o + i];
        sum_w += KW[i];
        sum_x += KW[i] * X[o + i];
    }
    if (mn > 0.0) mn = 0.0;
    if (mx == mn) {
        for (uint i = 0u; i < n; ++i) KL[o + i] = 0;
        neg_min = -mn;
        return 0.0;
    }
    precise float range = mx - mn;
    float iscale = div_rn(float(nmax), range);
    float scale = div_rn(1.0, iscale);
    precise float best = 0.0;
    for (uint i = 0u; i < n; ++i) {
        precise float xs = X[o + i] - mn;
        precise float v = iscale * xs;
        KL[o + i] = clamp(nearest_int(v), 0, nmax);
        precise float diff = scale * float(KL[o + i]) + mn - X[o + i];
        precise float err = use_mad ? abs(diff) : diff * diff;
        best += KW[i] * err;
    }
    for (int is = 0; is <= nstep; ++is) {
        precise float num = rmin + rdelta * float(is) + float(nmax);
        precise float rng = mx - mn;
        iscale = div_rn(num, rng);
        precise float sum_l = 0.0;
        precise float sum_l2 = 0.0;
        precise float sum_xl = 0.0;
        for (uint i = 0u; i < n; ++i) {
            precise float xs = X[o + i] - mn;
            precise float v = iscale * xs;
            int l = clamp(nearest_int(v), 0, nmax);
            KLA[i] = l;
            precise float wl = KW[i] * float(l);
            sum_l += wl;
            sum_l2 += wl * float(l);
            sum_xl += wl * X[o + i];
        }
        precise float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0) {
            precise float ns = sum_w * sum_xl - sum_x * sum_l;
            precise float nm = sum_l2 * sum_x - sum_l * sum_xl;
            float this_scale = div_rn(ns, D);
            float this_min = div_rn(nm, D);
            if (this_min > 0.0) { this_min = 0.0; this_scale = div_rn(sum_xl, sum_l2); }
            precise float cur = 0.0;
            for (uint i = 0u; i < n; ++i) {
                precise float diff = this_scale * float(KLA[i]) + this_min - X[o + i];
                precise float err = use_mad ? abs(diff) : diff * diff;
                cur += KW[i] * err;
            }
            if (cur < best) {
                for (uint i = 0u; i < n; ++i) KL[o + i] = KLA[i];
                best = cur; scale = this_scale; mn = this_min;
            }
        }
    }
    neg_min = -mn;
    return scale;
}

// rounded values l = clamp(nearest_int(iscale x), -nmax, nmax - 1) of X[o .. o+16) and their weighted sums
// (sum w x l, sum w l l) with w = x^2; with `store`, KL[o + i] = l + bias
vec2 sym_sums(uint o, int nmax, float iscale, int bias, bool store) {
    precise float sumlx = 0.0;
    precise float suml2 = 0.0;
    for (uint i = 0u; i < 16u; ++i) {
        precise float v = iscale * X[o + i];
        int l = clamp(nearest_int(v), -nmax, nmax - 1);
        if (store) KL[o + i] = l + bias;
        precise float w = X[o + i] * X[o + i];
        sumlx += w * X[o + i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    return vec2(sumlx, suml2);
}

// make_qx_quants with rmse type 1 (weights x^2) over 16 values: KL[o ..] in [0, 2 nmax); returns the scale
float qx_rmse1(uint o, int nmax) {
    float mx = signed_absmax(o, 16u);
    if (abs(mx) < 1e-15) { for (uint i = 0u; i < 16u; ++i) KL[o + i] = 0; return 0.0; }
    vec2 s = sym_sums(o, nmax, div_rn(float(-nmax), mx), nmax, true);
    float scale = s.y != 0.0 ? div_rn(s.x, s.y) : 0.0;
    precise float best = scale * s.x;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        precise float num = float(nmax) + 0.1 * float(is);
        float isc = div_rn(-num, mx);
        vec2 t = sym_sums(o, nmax, isc, nmax, false);
        precise float lhs = t.x * t.x;
        precise float rhs = best * t.y;
        if (t.y > 0.0 && lhs > rhs) {
            sym_sums(o, nmax, isc, nmax, true);
            scale = div_rn(t.x, t.y);
            best = scale * t.x;
        }
    }
    return scale;
}

// make_q3_quants (coordinate descent, up to 5 passes) over 16 values: KL[o ..] in [0, 2 nmax); returns the scale
float q3_search(uint o, int nmax) {
    float mx = signed_absmax(o, 16u);
    if (abs(mx) < 1e-15) { for (uint i = 0u; i < 16u; ++i) KL[o + i] = 0; return 0.0; }
    vec2 s = sym_sums(o, nmax, div_rn(float(-nmax), mx), 0, true);
    precise float sumlx = s.x;
    precise float suml2 = s.y;
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (uint i = 0u; i < 16u; ++i) {
            precise float w = X[o + i] * X[o + i];
            precise float slx = sumlx - w * X[o + i] * float(KL[o + i]);
            if (slx > 0.0) {
                precise float sl2 = suml2 - w * float(KL[o + i]) * float(KL[o + i]);
                precise float num = X[o + i] * sl2;
                int nl = clamp(nearest_int(div_rn(num, slx)), -nmax, nmax - 1);
                if (nl != KL[o + i]) {
                    slx += w * X[o + i] * float(nl);
                    sl2 += w * float(nl) * float(nl);
                    precise float lhs = slx * slx * suml2;
                    precise float rhs = sumlx * sumlx * sl2;
                    if (sl2 > 0.0 && lhs > rhs) { KL[o + i] = nl; sumlx = slx; suml2 = sl2; changed++; }
                }
            }
        }
        if (changed == 0) break;
    }
    for (uint i = 0u; i < 16u; ++i) KL[o + i] += nmax;
    return suml2 > 0.0 ? div_rn(sumlx, suml2) : 0.0;
}

void put16(uint at, uint h) { KB[at] = h & 0xffu; KB[at + 1u] = h >> 8; }

// four 2-bit planes of 128 values -> 32 bytes each half, at byte `at`
void pack2(uint at) {
    for (uint j = 0u; j < 256u; j += 128u) {
        for (uint l = 0u; l < 32u; ++l) {
            KB[at + j / 4u + l] = uint(KL[j + l]) | (uint(KL[j + l + 32u]) << 2) | (uint(KL[j + l + 64u]) << 4)
                                | (uint(KL[j + l + 96u]) << 6);
        }
    }
}

void q2_k() {
    float mins[16]; float scales[16];
    float max_scale = 0.0; float max_min = 0.0;
    for (uint j = 0u; j < 16u; ++j) {
        for (uint l = 0u; l < 16u; ++l) KW[l] = abs(X[16u * j + l]);
        scales[j] = qkx2(16u * j, 16u, 3, mins[j], -0.5, 0.1, 15, true);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    uint dh = 0u; uint mh = 0u;
    for (uint j = 0u; j < 16u; ++j) KB[j] = 0u;
    if (max_scale > 0.0) {
        float is = div_rn(15.0, max_scale);
        for (uint j = 0u; j < 16u; ++j) { precise float v = is * scales[j]; KB[j] = uint(nearest_int(v)) & 0xffu; }
        dh = f16_bits(div_rn(max_scale, 15.0));
    }
    if (max_min > 0.0) {
        float is = div_rn(15.0, max_min);
        for (uint j = 0u; j < 16u; ++j) {
            precise float v = is * mins[j];
            KB[j] = (KB[j] | (uint(nearest_int(v)) << 4)) & 0xffu;
        }
        mh = f16_bits(div_rn(max_min, 15.0));
    }
    put16(80u, dh); put16(82u, mh);
    for (uint j = 0u; j < 16u; ++j) {
        precise float d = h2f(dh) * float(KB[j] & 15u);
        if (d == 0.0) continue;
        precise float dm = h2f(mh) * float(KB[j] >> 4);
        for (uint l = 0u; l < 16u; ++l) {
            precise float num = X[16u * j + l] + dm;
            KL[16u * j + l] = clamp(nearest_int(div_rn(num, d)), 0, 3);
        }
    }
    pack2(16u);
}

void q3_k() {
    float scales[16];
    for (uint j = 0u; j < 16u; ++j) scales[j] = q3_search(16u * j, 4);
    float max_scale = absmax16(scales);
    for (uint i = 96u; i < 108u; ++i) KB[i] = 0u;
    uint dh = 0u;
    if (max_scale != 0.0) {
        float iscale = div_rn(-32.0, max_scale);
        for (uint j = 0u; j < 16u; ++j) {
            precise float v = iscale * scales[j];
            uint l = uint(clamp(nearest_int(v), -32, 31) + 32);
            if (j < 8u) KB[96u + j] = l & 15u; else KB[96u + j - 8u] |= (l & 15u) << 4;
            KB[96u + 8u + j % 4u] |= (l >> 4) << (2u * (j / 4u));
        }
        dh = f16_bits(div_rn(1.0, iscale));
    }
    put16(108u, dh);
    for (uint s = 0u; s < 16u; ++s) {
        uint lo = s < 8u ? (KB[96u + s] & 15u) : (KB[96u + s - 8u] >> 4);
        uint hi = (KB[104u + (s & 3u)] >> (2u * (s >> 2))) & 3u;
        precise float d = h2f(dh) * float(int(lo | (hi << 4)) - 32);
        if (d == 0.0) continue;
        for (uint l = 0u; l < 16u; ++l) KL[16u * s + l] = clamp(nearest_int(div_rn(X[16u * s + l], d)), -4, 3) + 4;
    }
    for (uint i = 0u; i < 32u; ++i) KB[i] = 0u;
    for (uint j = 0u; j < 256u; ++j) {
        if (KL[j] > 3) { KB[j % 32u] |= 1u << (j / 32u); KL[j] -= 4; }
    }
    pack2(32u);
}

// Q4_K / Q5_K: eight 32-value sub-blocks with 6-bit scales and mins (d, dmin at 0, scales at 4); fills KL
void k4_block(int nmax, float rmin, int nstep) {
    float mins[8]; float sc[8];
    float max_scale = 0.0; float max_min = 0.0;
    for (uint j = 0u; j < 8u; ++j) {
        precise float sum_x2 = 0.0;
        for (uint l = 0u; l < 32u; ++l) sum_x2 += X[32u * j + l] * X[32u * j + l];
        float av_x = sqrt_rn(div_rn(sum_x2, 32.0));
        for (uint l = 0u; l < 32u; ++l) { precise float w = av_x + abs(X[32u * j + l]); KW[l] = w; }
        sc[j] = qkx2(32u * j, 32u, nmax, mins[j], rmin, 0.1, nstep, false);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0.0 ? div_rn(63.0, max_scale) : 0.0;
    float inv_min = max_min > 0.0 ? div_rn(63.0, max_min) : 0.0;
    for (uint j = 0u; j < 8u; ++j) {
        precise float vs = inv_scale * sc[j];
        precise float vm = inv_min * mins[j];
        uint ls = min(uint(nearest_int(vs)) & 0xffu, 63u);
        uint lm = min(uint(nearest_int(vm)) & 0xffu, 63u);
        if (j < 4u) { KB[4u + j] = ls; KB[8u + j] = lm; }
        else {
            KB[8u + j] = (ls & 15u) | ((lm & 15u) << 4);
            KB[4u + j - 4u] |= (ls >> 4) << 6;
            KB[4u + j] |= (lm >> 4) << 6;
        }
    }
    uint dh = f16_bits(div_rn(max_scale, 63.0));
    uint mh = f16_bits(div_rn(max_min, 63.0));
    put16(0u, dh); put16(2u, mh);
    for (uint j = 0u; j < 8u; ++j) {
        uint s; uint m;
        if (j < 4u) { s = KB[4u + j] & 63u; m = KB[8u + j] & 63u; }
        else { s = (KB[8u + j] & 15u) | ((KB[j] >> 6) << 4); m = (KB[8u + j] >> 4) | ((KB[4u + j] >> 6) << 4); }
        precise float dd = h2f(dh) * float(s);
        if (dd == 0.0) continue;
        precise float dm = h2f(mh) * float(m);
        for (uint l = 0u; l < 32u; ++l) {
            precise float num = X[32u * j + l] + dm;
            KL[32u * j + l] = clamp(nearest_int(div_rn(num, dd)), 0, nmax);
        }
    }
}

void q4_k() {
    k4_block(15, -1.0, 20);
    for (uint c = 0u; c < 4u; ++c) {
        for (uint l = 0u; l < 32u; ++l) {
            KB[16u + 32u * c + l] = uint(KL[64u * c + l]) | (uint(KL[64u * c + 32u + l]) << 4);
        }
    }
}

void q5_k() {
    k4_block(31, -0.5, 15);
    for (uint l = 0u; l < 32u; ++l) KB[16u + l] = 0u;
    for (uint c = 0u; c < 4u; ++c) {
        for (uint l = 0u; l < 32u; ++l) {
            uint a = uint(KL[64u * c + l]); uint b = uint(KL[64u * c + 32u + l]);
            if (a > 15u) { a -= 16u; KB[16u + l] |= 1u << (2u * c); }
            if (b > 15u) { b -= 16u; KB[16u + l] |= 2u << (2u * c); }
            KB[48u + 32u * c + l] = a | (b << 4);
        }
    }
}

void q6_k() {
    float scales[16];
    for (uint j = 0u; j < 16u; ++j) scales[j] = qx_rmse1(16u * j, 32);
    float max_scale = absmax16(scales);
    if (abs(max_scale) < 1e-15) { for (uint i = 0u; i < 210u; ++i) KB[i] = 0u; return; }
    float iscale = div_rn(-128.0, max_scale);
    uint dh = f16_bits(div_rn(1.0, iscale));
    put16(208u, dh);
    for (uint j = 0u; j < 16u; ++j) {
        precise float v = iscale * scales[j];
        KB[192u + j] = uint(min(nearest_int(v), 127)) & 0xffu;
    }
    for (uint j = 0u; j < 16u; ++j) {
        precise float d = h2f(dh) * float(int(KB[192u + j] << 24) >> 24);
        if (d == 0.0) continue;
        for (uint l = 0u; l < 16u; ++l) KL[16u * j + l] = clamp(nearest_int(div_rn(X[16u * j + l], d)), -32, 31) + 32;
    }
    for (uint h = 0u; h < 2u; ++h) {
        uint lh = 128u * h; uint ql = 64u * h; uint qh = 128u + 32u * h;
        for (uint l = 0u; l < 32u; ++l) {
            uint a = uint(KL[lh + l]); uint b = uint(KL[lh + l + 32u]);
            uint c = uint(KL[lh + l + 64u]); uint e = uint(KL[lh + l + 96u]);
            KB[ql + l] = (a & 15u) | ((c & 15u) << 4);
            KB[ql + l + 32u] = (b & 15u) | ((e & 15u) << 4);
            KB[qh + l] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
        }
    }
}

// quantise X to K type t and write the block at byte offset o of the destination
void store_qk(uint t, uint o) {
    if (t == T_Q2_K) q2_k();
    else if (t == T_Q3_K) q3_k();
    else if (t == T_Q4_K) q4_k();
    else if (t == T_Q5_K) q5_k();
    else q6_k();
    uint n = tsize(t);
    for (uint i = 0u; i < n; i += 2u) d_u16[(o + i) >> 1] = uint16_t(KB[i] | (KB[i + 1u] << 8));
}
