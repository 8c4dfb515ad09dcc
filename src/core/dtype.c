/* Dtypes: sizes, names, PyTorch-style type promotion, and the portable half/bfloat16
 * conversions (round to nearest even, bit manipulation only, so every platform agrees). */
#include <string.h>
#include <strings.h>

#include "core_impl.h"

static const struct {
    const char *name;
    const char *alias; /* the long PyTorch-style name */
    size_t size;
} dtype_info[EM_DTYPE_COUNT] = {
    [EM_F64] = {"f64", "float64", 8}, [EM_F32] = {"f32", "float32", 4},
    [EM_F16] = {"f16", "float16", 2}, [EM_BF16] = {"bf16", "bfloat16", 2},
    [EM_I64] = {"i64", "int64", 8},   [EM_I32] = {"i32", "int32", 4},
    [EM_I16] = {"i16", "int16", 2},   [EM_I8] = {"i8", "int8", 1},
    [EM_U8] = {"u8", "uint8", 1},     [EM_BOOL] = {"bool", "bool", 1},
};

bool em_dtype_valid(int dt)
{
    return dt >= 0 && dt < EM_DTYPE_COUNT;
}

size_t em_dtype_size(em_dtype dt)
{
    return em_dtype_valid((int)dt) ? dtype_info[dt].size : 0;
}

const char *em_dtype_name(em_dtype dt)
{
    return em_dtype_valid((int)dt) ? dtype_info[dt].name : "?";
}

int em_dtype_parse(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < EM_DTYPE_COUNT; i++)
        if (!strcasecmp(name, dtype_info[i].name) || !strcasecmp(name, dtype_info[i].alias))
            return i;
    return -1;
}

bool em_dtype_is_float(em_dtype dt)
{
    return dt == EM_F64 || dt == EM_F32 || dt == EM_F16 || dt == EM_BF16;
}

bool em_dtype_is_int(em_dtype dt)
{
    return dt == EM_I64 || dt == EM_I32 || dt == EM_I16 || dt == EM_I8 || dt == EM_U8;
}

/* Rank of a signed integer type by width; u8 is handled separately. */
static int int_width(em_dtype dt)
{
    switch (dt) {
    case EM_I8: return 1;
    case EM_I16: return 2;
    case EM_I32: return 4;
    case EM_I64: return 8;
    default: return 0;
    }
}

em_dtype em_dtype_promote(em_dtype a, em_dtype b)
{
    if (!em_dtype_valid((int)a) || !em_dtype_valid((int)b)) {
        em_error(EM_ERR_DTYPE, "em_dtype_promote: invalid dtype (%d, %d)", (int)a, (int)b);
        return em_dtype_valid((int)a) ? a : em_dtype_valid((int)b) ? b : EM_F32;
    }
    if (a == b) return a;
    if (a == EM_BOOL) return b;
    if (b == EM_BOOL) return a;
    bool fa = em_dtype_is_float(a), fb = em_dtype_is_float(b);
    if (fa && !fb) return a;
    if (fb && !fa) return b;
    if (fa) {
        if (a == EM_F64 || b == EM_F64) return EM_F64;
        /* f32 with a 16-bit float, or f16 with bf16: neither 16-bit type holds the other. */
        return EM_F32;
    }
    if (a == EM_U8 || b == EM_U8) {
        em_dtype other = a == EM_U8 ? b : a;
        return other == EM_I8 ? EM_I16 : other;
    }
    return int_width(a) >= int_width(b) ? a : b;
}

uint16_t em_f32_to_f16(float f)
{
    uint32_t x = core_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep the top payload bits, force the quiet bit */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (halfway past 65504) rounds to Inf; Inf stays Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half: re-bias the exponent by -112, round the 13 bits */
        uint32_t odd = (ax >> 13) & 1u;
        ax += 0xc8000fffu + odd; /* -(112 << 23) mod 2^32, plus the rounding increment */
        return (uint16_t)(sign | (ax >> 13));
    }
    if (ax <= 0x33000000u) /* <= 2^-25: zero (2^-25 itself is a tie that rounds to even 0) */
        return (uint16_t)sign;
    /* Subnormal half: the value m * 2^(e - 150) counted in units of 2^-24 is m >> (126 - e),
     * a shift of 14..24 here; round the bits shifted out. */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t k = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (k & 1u))) k++; /* may carry into the smallest normal */
    return (uint16_t)(sign | k);
}

float em_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    if (e == 0x1f) /* Inf, or NaN made quiet (as hardware conversions do) */
        return core_bits_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
    if (e == 0) {
        if (m == 0) return core_bits_f32(sign);
        /* Subnormal: normalise so the leading one becomes the implicit bit. */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return core_bits_f32(sign | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return core_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t em_f32_to_bf16(float f)
{
    return core_f32_to_bf16(f);
}

float em_bf16_to_f32(uint16_t b)
{
    return core_bf16_to_f32(b);
}
