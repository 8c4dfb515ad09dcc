// Integer and bool elementwise ops (strided, broadcast through struct bidx): arithmetic that
// wraps like the dtype (computed in 64 bits, the store truncates), minimum/maximum, comparisons
// and logical ops (-> bool); logical ops on floats too; where and masked_fill for any element
// size (they only move bytes). Both inputs of one dtype.
__device__ __forceinline__ long long int_op(int op, long long a, long long b)
{
    switch (op) {
    case OP_ADD: return (long long)((u64)a + (u64)b);
    case OP_SUB: return (long long)((u64)a - (u64)b);
    case OP_MUL: return (long long)((u64)a * (u64)b);
    case OP_MINIMUM: return b < a ? b : a;
    case OP_MAXIMUM: return a < b ? b : a;
    case OP_EQ: return a == b;
    case OP_NE: return a != b;
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    case OP_LOGICAL_AND: return a != 0 && b != 0;
    case OP_LOGICAL_OR: return a != 0 || b != 0;
    case OP_LOGICAL_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

__device__ __forceinline__ bool to_bool_op(int op)
{
    return op == OP_EQ || op == OP_NE || op == OP_LT || op == OP_LE || op == OP_GT || op == OP_GE ||
           op == OP_LOGICAL_AND || op == OP_LOGICAL_OR || op == OP_LOGICAL_XOR;
}

template <typename T>
__device__ void int_binary(int op, const T *x, const T *y, void *o, i64 n, const bidx &s)
{
    bool tb = to_bool_op(op);
    BLOOP(n)
    long long r = int_op(op, (long long)x[f[0]], (long long)y[f[1]]);
    if (tb)
        ((unsigned char *)o)[f[3]] = (unsigned char)r;
    else
        ((T *)o)[f[3]] = (T)r;
    BEND
}

template <typename T>
__device__ void float_logical(int op, const T *x, const T *y, unsigned char *o, i64 n,
                              const bidx &s)
{
    BLOOP(n)
    bool a = x[f[0]] != (T)0, b = y[f[1]] != (T)0; // NaN is true, as on the CPU
    o[f[3]] = op == OP_LOGICAL_AND ? (a && b) : op == OP_LOGICAL_OR ? (a || b) : (a != b);
    BEND
}

#define INT_BINARY(SUF, T)                                                                         \
    extern "C" __global__ void em_int_b_##SUF(int op, const T *x, const T *y, void *o, i64 n,      \
                                              bidx s)                                              \
    {                                                                                              \
        int_binary<T>(op, x, y, o, n, s);                                                          \
    }
INT_BINARY(i64, long long)
INT_BINARY(i32, int)
INT_BINARY(i16, short)
INT_BINARY(i8, signed char)
INT_BINARY(u8, unsigned char)

extern "C" __global__ void em_logical_b_f32(int op, const float *x, const float *y,
                                            unsigned char *o, i64 n, bidx s)
{
    float_logical<float>(op, x, y, o, n, s);
}

extern "C" __global__ void em_logical_b_f64(int op, const double *x, const double *y,
                                            unsigned char *o, i64 n, bidx s)
{
    float_logical<double>(op, x, y, o, n, s);
}

#define MOVE_KERNELS(SZ, T)                                                                        \
    extern "C" __global__ void em_where_s##SZ(const unsigned char *c, const T *a, const T *b,     \
                                              T *o, i64 n, bidx s)                                 \
    {                                                                                              \
        BLOOP(n) o[f[3]] = c[f[0]] ? a[f[1]] : b[f[2]];                                            \
        BEND                                                                                       \
    }                                                                                              \
    extern "C" __global__ void em_mfill_s##SZ(const T *x, const unsigned char *m, T *o, i64 n,    \
                                              u64 pattern, bidx s)                                 \
    {                                                                                              \
        T v = (T)pattern;                                                                          \
        BLOOP(n) o[f[3]] = m[f[1]] ? v : x[f[0]];                                                  \
        BEND                                                                                       \
    }
MOVE_KERNELS(1, unsigned char)
MOVE_KERNELS(2, unsigned short)
MOVE_KERNELS(4, unsigned int)
MOVE_KERNELS(8, unsigned long long)
