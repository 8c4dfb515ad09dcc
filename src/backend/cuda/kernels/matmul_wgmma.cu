// Hopper matmul for f16 and bf16: warpgroup MMA (wgmma.mma_async m64n256k16, f32 accumulation)
// reading both operands from shared memory, sm_90 only. Block tiles 128 x 256 x 64, two
// warpgroups of 64 x 256, 3 cp.async stages. Both operands K-major: A [M][K] (lda), B as [N][K]
// (ldb); the host transposes an operand stored the other way first. Shared tiles use the
// 128-byte swizzled layout: each tile row is 128 bytes (64 elements of K) with its 16-byte chunk
// kc stored at position kc ^ (row % 8), groups of 8 rows 1024 bytes apart (the descriptor's
// stride byte offset); tiles start 1024-byte aligned. A warp's cp.async writes then cover whole
// rows (no bank conflicts) while its global reads stay coalesced.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // sm_90a: the wgmma instructions
#define WG_BK 64
#define WG_STAGES 3
#define WG_A_BYTES (128 * WG_BK * 2)
#define WG_B_BYTES (256 * WG_BK * 2)
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)

// byte offset of 16-byte chunk kc of row r in a [rows][64] K-major swizzled tile
__device__ __forceinline__ unsigned wg_chunk(int r, int kc)
{
    return (unsigned)(r * 128 + ((kc ^ (r & 7)) << 4));
}

__device__ __forceinline__ unsigned long long wg_desc(unsigned addr)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) |
           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// One m64n256k16 product, D += A . B; TY is the operand type in the instruction's name.
#define WGMMA_256(TY)                                                                              \
    asm volatile("{\n"                                                                             \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n"   \
                 "}\n"                                                                             \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])                                                              \
                 : "l"(da), "l"(db))

template <int BF>
__device__ __forceinline__ void wgmma_256(float *d, unsigned long long da, unsigned long long db)
{
    if (BF)
        WGMMA_256("bf16");
    else
        WGMMA_256("f16");
}

template <int BF>
__device__ void wg_matmul(const unsigned short *a, const unsigned short *b, unsigned short *c,
                          i64 M, i64 N, i64 K, i64 lda, i64 ldb)
{
    extern __shared__ __align__(1024) unsigned char wsm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, w = warp & 3;
    const i64 m0 = (i64)blockIdx.y * 128, n0 = (i64)blockIdx.x * 256;
    const int ktiles = (int)((K + WG_BK - 1) / WG_BK);
    const unsigned base = smem_u32(wsm);
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; i++) d[i] = 0.f;
    auto load_stage = [&](int stage, int kt) {
        unsigned sa = base + stage * WG_STAGE_BYTES, sb = sa + WG_A_BYTES;
        const i64 k0 = (i64)kt * WG_BK;
#pragma unroll
        for (int i = 0; i < 4; i++) { // A: 128 rows x 8 chunks
            int ch = tid + i * 256, r = ch >> 3, kc = ch & 7;
            i64 m = m0 + r, k = k0 + kc * 8;
            bool v = m < M && k < K;
            cp_async16(sa + wg_chunk(r, kc), v ? a + m * lda + k : a, v);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) { // B: 256 rows x 8 chunks
            int ch = tid + i * 256, r = ch >> 3, kc = ch & 7;
            i64 n = n0 + r, k = k0 + kc * 8;
            bool v = n < N && k < K;
            cp_async16(sb + wg_chunk(r, kc), v ? b + n * ldb + k : b, v);
        }
    };
#pragma unroll
    for (int st = 0; st < WG_STAGES - 1; st++) {
        if (st < ktiles) load_stage(st, st);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    // Iteration kt: wait for tile kt, start its products, let the products of kt - 1 finish
    // (one batch stays in flight), then refill the stage kt - 1 used.
    for (int kt = 0; kt < ktiles; kt++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(WG_STAGES - 2));
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        unsigned sa = base + (kt % WG_STAGES) * WG_STAGE_BYTES + wg * 64 * 128;
        unsigned sb = base + (kt % WG_STAGES) * WG_STAGE_BYTES + WG_A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < WG_BK / 16; kk++)
            wgmma_256<BF>(d, wg_desc(sa + kk * 32), wg_desc(sb + kk * 32));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        __syncthreads(); // both warpgroups are done with stage kt - 1
        int nt = kt + WG_STAGES - 1;
        if (nt < ktiles) load_stage(nt % WG_STAGES, nt);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    asm volatile("cp.async.wait_group 0;\n" ::);
    // d[4j + e]: row wg*64 + w*16 + lane/4 (+8 for e >= 2), column 8j + 2 (lane % 4) (+1 odd e)
#pragma unroll
    for (int j = 0; j < 32; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            i64 row = m0 + wg * 64 + w * 16 + (lane >> 2) + h * 8;
            i64 col = n0 + j * 8 + (lane & 3) * 2;
            if (row >= M || col >= N) continue;
            unsigned v = pack2<BF>(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            unsigned short *p = c + row * N + col;
            if (col + 1 < N && (N & 1) == 0)
                *(unsigned *)p = v;
            else {
                p[0] = (unsigned short)(v & 0xffff);
                if (col + 1 < N) p[1] = (unsigned short)(v >> 16);
            }
        }
}

extern "C" __global__ void __launch_bounds__(256, 1)
    em_mm_wg_bf16(const unsigned short *a, const unsigned short *b, unsigned short *c, i64 M, i64 N,
                  i64 K, i64 lda, i64 ldb)
{
    wg_matmul<1>(a, b, c, M, N, K, lda, ldb);
}

extern "C" __global__ void __launch_bounds__(256, 1)
    em_mm_wg_f16(const unsigned short *a, const unsigned short *b, unsigned short *c, i64 M, i64 N,
                 i64 K, i64 lda, i64 ldb)
{
    wg_matmul<0>(a, b, c, M, N, K, lda, ldb);
}
#endif

// dst[c][r] = src[r][c] for 2-byte elements: src [rows][cols] with row stride lds, dst
// contiguous [cols][rows]; 32 x 32 tiles through shared memory (padded against bank conflicts).
extern "C" __global__ void em_transpose_2(const unsigned short *src, unsigned short *dst, i64 rows,
                                          i64 cols, i64 lds)
{
    __shared__ unsigned short t[32][33];
    i64 r0 = (i64)blockIdx.y * 32, c0 = (i64)blockIdx.x * 32;
    for (int i = threadIdx.y; i < 32; i += 8) {
        i64 r = r0 + i, cc = c0 + threadIdx.x;
        if (r < rows && cc < cols) t[i][threadIdx.x] = src[r * lds + cc];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        i64 cc = c0 + i, r = r0 + threadIdx.x;
        if (r < rows && cc < cols) dst[cc * rows + r] = t[threadIdx.x][i];
    }
}
