// Shared declarations of every pyggml compute shader: extensions, type ids (ggml's), buffer aliases per binding
// (bindings 0..4 sources A..E, 5 destination D, 6 the backend's status word; whole VkBuffers addressed by byte
// offsets), typed loads/stores and per-element dequantisation of ggml's block formats.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#define T_F32 0u
#define T_F16 1u
#define T_Q4_0 2u
#define T_Q4_1 3u
#define T_Q5_0 6u
#define T_Q5_1 7u
#define T_Q8_0 8u
#define T_Q8_1 9u
#define T_Q2_K 10u
#define T_Q3_K 11u
#define T_Q4_K 12u
#define T_Q5_K 13u
#define T_Q6_K 14u
#define T_I8 24u
#define T_I16 25u
#define T_I32 26u
#define T_I64 27u
#define T_BF16 30u

bool is_quant(uint t) { return (t >= 2u && t <= 15u); }
uint blck(uint t) { return t >= T_Q2_K && t <= 15u ? 256u : (is_quant(t) ? 32u : 1u); }
uint tsize(uint t) {
    switch (t) {
    case T_F32: return 4u; case T_F16: return 2u; case T_BF16: return 2u; case T_I8: return 1u;
    case T_I16: return 2u; case T_I32: return 4u; case T_I64: return 8u;
    case T_Q4_0: return 18u; case T_Q4_1: return 20u; case T_Q5_0: return 22u; case T_Q5_1: return 24u;
    case T_Q8_0: return 34u; case T_Q8_1: return 36u; case T_Q2_K: return 84u; case T_Q3_K: return 110u;
    case T_Q4_K: return 144u; case T_Q5_K: return 176u; case T_Q6_K: return 210u;
    }
    return 1u;
}

// linear workgroup id over a 2-D grid (x is limited to 65535 groups)
uint wg_id() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
// a macro, so gl_WorkGroupSize is read after the shader's local_size declaration
#define g_id() (wg_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x)

#define DECLARE_SRC(B, X) \
layout(std430, set = 0, binding = B) readonly buffer X##_F32 { float X##_f32[]; }; \
layout(std430, set = 0, binding = B) readonly buffer X##_F16 { float16_t X##_f16[]; }; \
layout(std430, set = 0, binding = B) readonly buffer X##_U16 { uint16_t X##_u16[]; }; \
layout(std430, set = 0, binding = B) readonly buffer X##_I16 { int16_t X##_i16[]; }; \
layout(std430, set = 0, binding = B) readonly buffer X##_U8 { uint8_t X##_u8[]; }; \
layout(std430, set = 0, binding = B) readonly buffer X##_I8 { int8_t X##_i8[]; }; \
layout(std430, set = 0, binding = B) readonly buffer X##_I32 { int X##_i32[]; }; \
float X##_h(uint o) { return float(X##_f16[o >> 1]); } \
uint X##_b(uint o) { return uint(X##_u8[o]); } \
uint X##_w(uint o) { return X##_b(o) | (X##_b(o + 1u) << 8) | (X##_b(o + 2u) << 16) | (X##_b(o + 3u) << 24); } \
float X##_ld(uint t, uint o) { \
    if (t == T_F32) return X##_f32[o >> 2]; \
    if (t == T_F16) return X##_h(o); \
    if (t == T_BF16) return uintBitsToFloat(uint(X##_u16[o >> 1]) << 16); \
    if (t == T_I32 || t == T_I64) return float(X##_i32[o >> 2]); \
    if (t == T_I16) return float(X##_i16[o >> 1]); \
    if (t == T_I8) return float(X##_i8[o]); \
    return 0.0; \
} \
int X##_idx(uint o, bool wide) { \
    int lo = X##_i32[o >> 2]; \
    if (wide && X##_i32[(o >> 2) + 1u] != 0) return -1; \
    return lo; \
} \
int X##_ldi(uint t, uint o) { \
    if (t == T_I32 || t == T_I64) return X##_i32[o >> 2]; \
    if (t == T_I16) return int(X##_i16[o >> 1]); \
    if (t == T_I8) return int(X##_i8[o]); \
    return int(X##_ld(t, o)); \
} \
float X##_scale_k4(uint bo, uint j, bool want_min) { \
    uint sc; uint m; \
    if (j < 4u) { sc = X##_b(bo + 4u + j) & 63u; m = X##_b(bo + 8u + j) & 63u; } \
    else { sc = (X##_b(bo + 8u + j) & 15u) | ((X##_b(bo + j) >> 6) << 4); \
           m = (X##_b(bo + 8u + j) >> 4) | ((X##_b(bo + 4u + j) >> 6) << 4); } \
    return float(want_min ? m : sc); \
} \
/* the integer level of element i (0..255) of a Q4_K (0..15), Q5_K (0..31) or Q6_K (-32..31) block at bo: one place \
   for the bit layouts, which X##_dq and mul_mat_q8's sub-block dots read */ \
int X##_klevel(uint t, uint bo, uint i) { \
    if (t == T_Q6_K) { \
        uint n = i >> 7; uint qt = (i & 127u) >> 5; uint l = i & 31u; \
        uint ql = X##_b(bo + n * 64u + l + (qt & 1u) * 32u); ql = qt >= 2u ? (ql >> 4) : (ql & 15u); \
        uint qh = (X##_b(bo + 128u + n * 32u + l) >> (2u * qt)) & 3u; \
        return int(ql | (qh << 4)) - 32; \
    } \
    uint sb = i >> 5; uint l = i & 31u; \
    uint q = X##_b(bo + (t == T_Q4_K ? 16u : 48u) + (sb >> 1) * 32u + l); q = (sb & 1u) == 0u ? (q & 15u) : (q >> 4); \
    if (t == T_Q5_K) q |= ((X##_b(bo + 16u + l) >> sb) & 1u) << 4; \
    return int(q); \
} \
float X##_dq(uint t, uint bo, uint i) { \
    if (t == T_Q4_0 || t == T_Q4_1) { \
        uint q = X##_b(bo + (t == T_Q4_0 ? 2u : 4u) + (i & 15u)); q = i < 16u ? (q & 15u) : (q >> 4); \
        return t == T_Q4_0 ? X##_h(bo) * (float(q) - 8.0) : X##_h(bo) * float(q) + X##_h(bo + 2u); \
    } \
    if (t == T_Q5_0 || t == T_Q5_1) { \
        uint hb = t == T_Q5_0 ? 2u : 4u; \
        uint q = X##_b(bo + hb + 4u + (i & 15u)); q = i < 16u ? (q & 15u) : (q >> 4); \
        q |= ((X##_b(bo + hb + (i >> 3)) >> (i & 7u)) & 1u) << 4; \
        return t == T_Q5_0 ? X##_h(bo) * (float(q) - 16.0) : X##_h(bo) * float(q) + X##_h(bo + 2u); \
    } \
    if (t == T_Q8_0) return X##_h(bo) * float(X##_i8[bo + 2u + i]); \
    if (t == T_Q8_1) return X##_h(bo) * float(X##_i8[bo + 4u + i]); \
    if (t == T_Q4_K || t == T_Q5_K) { \
        uint is = i >> 5; \
        return X##_h(bo) * X##_scale_k4(bo, is, false) * float(X##_klevel(t, bo, i)) \
            - X##_h(bo + 2u) * X##_scale_k4(bo, is, true); \
    } \
    if (t == T_Q6_K) { \
        float sc = float(X##_i8[bo + 192u + (i >> 4)]); \
        return X##_h(bo + 208u) * sc * float(X##_klevel(t, bo, i)); \
    } \
    if (t == T_Q2_K) { \
        uint n = i >> 7; uint r = i & 127u; uint j = r >> 5; uint l = r & 31u; \
        uint sc = X##_b(bo + n * 8u + j * 2u + (l >> 4)); \
        uint q = (X##_b(bo + 16u + n * 32u + l) >> (2u * j)) & 3u; \
        return X##_h(bo + 80u) * float(sc & 15u) * float(q) - X##_h(bo + 82u) * float(sc >> 4); \
    } \
    if (t == T_Q3_K) { \
        uint n = i >> 7; uint r = i & 127u; uint j = r >> 5; uint l = r & 31u; uint s = n * 8u + j * 2u + (l >> 4); \
        uint lo = s < 8u ? (X##_b(bo + 96u + s) & 15u) : (X##_b(bo + 96u + s - 8u) >> 4); \
        uint hi = (X##_b(bo + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u; \
        int sc = int(lo | (hi << 4)) - 32; \
        int q = int((X##_b(bo + 32u + n * 32u + l) >> (2u * j)) & 3u); \
        if ((X##_b(bo + l) & (1u << (n * 4u + j))) == 0u) q -= 4; \
        return X##_h(bo + 108u) * float(sc) * float(q); \
    } \
    return 0.0; \
} \
float X##_at(uint t, uint row, uint i0, uint nb0) { \
    if (is_quant(t)) { uint bs = blck(t); return X##_dq(t, row + (i0 / bs) * tsize(t), i0 % bs); } \
    return X##_ld(t, row + i0 * nb0); \
}

#define DECLARE_DST(B) \
layout(std430, set = 0, binding = B) buffer D_F32 { float d_f32[]; }; \
layout(std430, set = 0, binding = B) buffer D_F16 { float16_t d_f16[]; }; \
layout(std430, set = 0, binding = B) buffer D_U16 { uint16_t d_u16[]; }; \
layout(std430, set = 0, binding = B) buffer D_I16 { int16_t d_i16[]; }; \
layout(std430, set = 0, binding = B) buffer D_U8 { uint8_t d_u8[]; }; \
layout(std430, set = 0, binding = B) buffer D_I8 { int8_t d_i8[]; }; \
layout(std430, set = 0, binding = B) buffer D_I32 { int d_i32[]; }; \
uint16_t f32_to_bf16(float v) { \
    uint u = floatBitsToUint(v); \
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64u); \
    return uint16_t((u + (0x7fffu + ((u >> 16) & 1u))) >> 16); \
} \
void d_st(uint t, uint o, float v) { \
    if (t == T_F32) d_f32[o >> 2] = v; \
    else if (t == T_F16) d_f16[o >> 1] = float16_t(v); \
    else if (t == T_BF16) d_u16[o >> 1] = f32_to_bf16(v); \
    else if (t == T_I32) d_i32[o >> 2] = int(v); \
    else if (t == T_I16) d_i16[o >> 1] = int16_t(int(v)); \
    else if (t == T_I8) d_i8[o] = int8_t(int(v)); \
    else if (t == T_I64) { d_i32[o >> 2] = int(v); d_i32[(o >> 2) + 1u] = int(v) < 0 ? -1 : 0; } \
} \
void d_sti(uint t, uint o, int v) { \
    if (t == T_I32) d_i32[o >> 2] = v; \
    else if (t == T_I16) d_i16[o >> 1] = int16_t(v); \
    else if (t == T_I8) d_i8[o] = int8_t(v); \
    else if (t == T_I64) { d_i32[o >> 2] = v; d_i32[(o >> 2) + 1u] = v < 0 ? -1 : 0; } \
    else d_st(t, o, float(v)); \
}

// the generic push-constant block: byte offsets, ne/nb of src0 (a), src1 (b) and dst (d), 5 scalar params
#define GENERIC_PC \
layout(push_constant) uniform PC { \
    uint oa, ob, od; \
    uint ne00, ne01, ne02, ne03, nb00, nb01, nb02, nb03; \
    uint ne10, ne11, ne12, ne13, nb10, nb11, nb12, nb13; \
    uint ne0, ne1, ne2, ne3, nb0, nb1, nb2, nb3; \
    uint u0; float f0, f1, f2, f3; \
} pc;

// Index checks (GET_ROWS, SET_ROWS, MUL_MAT_ID): a shader that finds an index outside its range skips the write
// and stores a code naming the node in the backend's status word (binding 6; the first report wins); the host raises
// ComputeError once the graph has run. The code comes as the bits of the push constants' last float (f3), so
// DECLARE_STATUS follows GENERIC_PC. X_idx(o, wide) reads an i32 (wide: i64) index; -1 when it does not fit 31 bits.
#define DECLARE_STATUS \
layout(std430, set = 0, binding = 6) buffer STATUS_W { uint status_word[]; }; \
void report_bad_index() { atomicCompSwap(status_word[0], 0u, floatBitsToUint(pc.f3)); }

// split a linear element index into 4 coordinates of shape (n0, n1, n2, n3)
uvec4 coords(uint g, uint n0, uint n1, uint n2) {
    uint i0 = g % n0; g /= n0; uint i1 = g % n1; g /= n1; uint i2 = g % n2; return uvec4(i0, i1, i2, g / n2);
}

// work-group reductions over WG threads (the shader defines WG and declares `shared float red[WG];`)
#define DEFINE_REDUCE(WGN) \
shared float red[WGN]; \
float wg_sum(float v) { \
    uint t = gl_LocalInvocationID.x; red[t] = v; barrier(); \
    for (uint s = WGN / 2u; s > 0u; s >>= 1) { if (t < s) red[t] += red[t + s]; barrier(); } \
    float r = red[0]; barrier(); return r; \
} \
float wg_max(float v) { \
    uint t = gl_LocalInvocationID.x; red[t] = v; barrier(); \
    for (uint s = WGN / 2u; s > 0u; s >>= 1) { if (t < s) red[t] = max(red[t], red[t + s]); barrier(); } \
    float r = red[0]; barrier(); return r; \
}

#define NEG_INF uintBitsToFloat(0xff800000u)
