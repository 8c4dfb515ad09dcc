// Hopper matmul for f16, bf16 and TF32: warpgroup MMA (wgmma.mma_async m64n256 / m64n128, f32
// accumulation) reading both operands from shared memory, fed by the bulk tensor copy engine
// (TMA), sm_90a only. Shared tiles use the 128-byte swizzled layout the copy engine writes: each
// tile row is 128 bytes with its 16-byte chunk kc at position kc ^ (row % 8), groups of 8 rows
// 1024 bytes apart (the descriptor's stride byte offset); tiles start 1024-byte aligned.
#include "matmul.cuh"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // sm_90a: the wgmma instructions
#include "matmul_ep.cuh"
#include "matmul_mma.cuh"
#include "matmul_tw.cuh"
// One m64n256 product, D += A . B: OP names shape and types ("m64n256k16.f32.bf16.bf16"), TAIL the
// immediates (scale-d, the operand scales and, for 16-bit types, the transpose flags).
#define WGMMA_256(OP, TAIL)                                                                              \
    asm volatile("{\n"                                                                             \
                 "wgmma.mma_async.sync.aligned." OP " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, " TAIL ";\n"   \
                 "}\n"                                                                             \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])                                                              \
                 : "l"(da), "l"(db))

// The same for m64n128 (64 accumulators).
#define WGMMA_128(OP, TAIL) \
    asm volatile("{\n" \
                 "wgmma.mma_async.sync.aligned." OP " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, " TAIL ";\n" \
                 "}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                 : "l"(da), "l"(db))

// The same with A from registers (a[0..3], TF32; TAIL 1, 1, 1).
#define WGMMA_RS_256(OP) \
    asm volatile("{\n" \
                 "wgmma.mma_async.sync.aligned." OP " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, 1, 1, 1;\n" \
                 "}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))

#define WGMMA_RS_128(OP) \
    asm volatile("{\n" \
                 "wgmma.mma_async.sync.aligned." OP " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1;\n" \
                 "}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))

// Block tiles 128 x BN (BN = 256 or 128), BK = 128 bytes of K (64 f16/bf16, 32 tf32), 4 stages.
// Warpgroup 0 is the producer: one thread issues the bulk tensor copies (cp.async.bulk.tensor,
// 128-byte swizzle, zero fill past the edges) into a stage once both consumers have released it,
// and the copies complete on the stage's `full` mbarrier. Warpgroups 1 and 2 are the consumers,
// 64 rows each: they wait on `full`, issue the stage's wgmma products, keep one batch in flight,
// and release the stage before on its `empty` mbarrier (one arrival per consumer warp). setmaxnreg
// moves registers from the producer (40) to the consumers (232). The grid holds one block per
// multiprocessor; each loops over output tiles (grouped 16 row tiles at a time for L2 reuse), so
// the producer fills the next tile's stages while the consumers store the last one.
// Operand layouts: K-major ([rows][K], one TMA box of BK x rows) or MN-major ([K][rows], boxes of
// 64 rows x 64 K, one 8 KiB atom column each; wgmma's transpose flag, descriptor LBO = 8 KiB
// between the columns). TY: 0 f16, 1 bf16, 2 tf32 (K-major only, f32 output).
#define TW_A_BYTES (128 * 128)

// Shared-memory descriptor of a 128-byte swizzled operand: 8-row groups 1024 bytes apart, lbo the
// byte distance between 64-element atom columns (MN-major; unused for K-major).
__device__ __forceinline__ unsigned long long tw_desc(unsigned addr, unsigned lbo)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

template <int TY, int TA, int TB, int BN>
__device__ __forceinline__ void tw_mma(float *d, unsigned long long da, unsigned long long db)
{
    if constexpr (TY == 2) {
        if constexpr (BN == 256)
            WGMMA_256("m64n256k8.f32.tf32.tf32", "1, 1, 1");
        else
            WGMMA_128("m64n128k8.f32.tf32.tf32", "1, 1, 1");
    } else if constexpr (BN == 256) {
        if constexpr (TY == 1 && !TA && !TB) WGMMA_256("m64n256k16.f32.bf16.bf16", "1, 1, 1, 0, 0");
        if constexpr (TY == 1 && !TA && TB) WGMMA_256("m64n256k16.f32.bf16.bf16", "1, 1, 1, 0, 1");
        if constexpr (TY == 1 && TA && !TB) WGMMA_256("m64n256k16.f32.bf16.bf16", "1, 1, 1, 1, 0");
        if constexpr (TY == 1 && TA && TB) WGMMA_256("m64n256k16.f32.bf16.bf16", "1, 1, 1, 1, 1");
        if constexpr (TY == 0 && !TA && !TB) WGMMA_256("m64n256k16.f32.f16.f16", "1, 1, 1, 0, 0");
        if constexpr (TY == 0 && !TA && TB) WGMMA_256("m64n256k16.f32.f16.f16", "1, 1, 1, 0, 1");
        if constexpr (TY == 0 && TA && !TB) WGMMA_256("m64n256k16.f32.f16.f16", "1, 1, 1, 1, 0");
        if constexpr (TY == 0 && TA && TB) WGMMA_256("m64n256k16.f32.f16.f16", "1, 1, 1, 1, 1");
    } else {
        if constexpr (TY == 1 && !TA && !TB) WGMMA_128("m64n128k16.f32.bf16.bf16", "1, 1, 1, 0, 0");
        if constexpr (TY == 1 && !TA && TB) WGMMA_128("m64n128k16.f32.bf16.bf16", "1, 1, 1, 0, 1");
        if constexpr (TY == 1 && TA && !TB) WGMMA_128("m64n128k16.f32.bf16.bf16", "1, 1, 1, 1, 0");
        if constexpr (TY == 1 && TA && TB) WGMMA_128("m64n128k16.f32.bf16.bf16", "1, 1, 1, 1, 1");
        if constexpr (TY == 0 && !TA && !TB) WGMMA_128("m64n128k16.f32.f16.f16", "1, 1, 1, 0, 0");
        if constexpr (TY == 0 && !TA && TB) WGMMA_128("m64n128k16.f32.f16.f16", "1, 1, 1, 0, 1");
        if constexpr (TY == 0 && TA && !TB) WGMMA_128("m64n128k16.f32.f16.f16", "1, 1, 1, 1, 0");
        if constexpr (TY == 0 && TA && TB) WGMMA_128("m64n128k16.f32.f16.f16", "1, 1, 1, 1, 1");
    }
}

// A consumer warpgroup's k loop for one output tile: for each of kts stages, waits for it to
// fill, calls issue(stage address, kt) to issue and commit its products, keeps one batch in
// flight and releases the stage before (one arrival per consumer warp), the last one once all
// products are done. it counts the stages used so far (both warpgroups and the producer walk
// the same sequence).
template <typename Issue>
__device__ __forceinline__ void tw_kloop(unsigned base, unsigned stage, int kts, int &it, int lane,
                                         Issue &&issue)
{
    const unsigned full0 = base + TW_STAGES * stage, empty0 = full0 + 8 * TW_STAGES;
    for (int kt = 0; kt < kts; kt++, it++) {
        const int s = it % TW_STAGES;
        mbar_wait(full0 + 8 * s, (it / TW_STAGES) & 1);
        issue(base + s * stage, kt);
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kt > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % TW_STAGES));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % TW_STAGES));
}

// A consumer warpgroup's products for one output tile: d = the sum over kts k tiles of its 64
// rows of the stage's A tile times the B tile.
template <int TY, int TA, int TB, int BN>
__device__ __forceinline__ void tw_consume(float *d, unsigned base, int kts, int &it, int cw,
                                           int lane)
{
    constexpr int STAGE = TW_A_BYTES + BN * 128;
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
    tw_kloop(base, STAGE, kts, it, lane, [&](unsigned st, int) {
        const unsigned sa = st + cw * 8192, sb = st + TW_A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            tw_mma<TY, TA, TB, BN>(d, tw_desc(sa + kk * (TA ? 2048 : 32), 8192),
                                   tw_desc(sb + kk * (TB ? 2048 : 32), 8192));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    });
}

template <int TY, int TA, int TB, int BN>
__device__ void tw_matmul(const em_tmap *ma, const em_tmap *mb, void *c, int M, int N, int K,
                          const mmep &ep)
{
    constexpr int STAGE = TW_A_BYTES + BN * 128, BK = TY == 2 ? 32 : 64;
    const unsigned base = tw_start(STAGE);
    const int tid = threadIdx.x, wg = tid >> 7;
    const int tm = (M + 127) / 128, tn = (N + BN - 1) / BN, tiles = tm * tn;
    const int kts = (K + BK - 1) / BK;
    if (wg == 0) {
        tw_regs_producer();
        if (tid == 0)
            tw_produce(base, STAGE, STAGE, tm, tn, kts,
                       [&](unsigned sa, unsigned full, int mt, int nt, int kt) {
                           const unsigned sb = sa + TW_A_BYTES;
                           const int m0 = mt * 128, n0 = nt * BN, k0 = kt * BK;
                           if (TA) {
                               tma_load_2d(sa, ma, m0, k0, full);
                               tma_load_2d(sa + 8192, ma, m0 + 64, k0, full);
                           } else
                               tma_load_2d(sa, ma, k0, m0, full);
                           if (TB) {
#pragma unroll
                               for (int j = 0; j < BN / 64; j++)
                                   tma_load_2d(sb + 8192 * j, mb, n0 + 64 * j, k0, full);
                           } else
                               tma_load_2d(sb, mb, k0, n0, full);
                       });
    } else {
        tw_regs_consumer();
        const int cw = wg - 1, w = (tid >> 5) & 3, lane = tid & 31;
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            tw_tile(t, tm, tn, mt, nt);
            float d[BN / 2];
            tw_consume<TY, TA, TB, BN>(d, base, kts, it, cw, lane);
            // d[4j + e]: row w*16 + lane/4 (+8 for e >= 2), column 8j + 2 (lane % 4) (+1 odd e)
            const i64 r0 = (i64)mt * 128 + cw * 64 + w * 16 + (lane >> 2);
            const i64 c0 = (i64)nt * BN + (lane & 3) * 2;
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const i64 row = r0 + h * 8, col = c0 + j * 8;
                    if (row >= M || col >= N) continue;
                    float x = d[4 * j + 2 * h], y = d[4 * j + 2 * h + 1];
                    if (ep.on) { // matmul_bias_act (TY is ep_apply's type code)
                        x = ep_apply<TY>(ep, x, col, row * N + col);
                        if (col + 1 < N) y = ep_apply<TY>(ep, y, col + 1, row * N + col + 1);
                    }
                    if constexpr (TY == 2) {
                        float *p = (float *)c + row * N + col;
                        if (col + 1 < N && (N & 1) == 0)
                            *(float2 *)p = make_float2(x, y);
                        else {
                            p[0] = x;
                            if (col + 1 < N) p[1] = y;
                        }
                    } else {
                        const unsigned v = pack2<TY>(x, y);
                        unsigned short *p = (unsigned short *)c + row * N + col;
                        if (col + 1 < N && (N & 1) == 0)
                            *(unsigned *)p = v;
                        else {
                            p[0] = (unsigned short)(v & 0xffff);
                            if (col + 1 < N) p[1] = (unsigned short)(v >> 16);
                        }
                    }
                }
        }
    }
}

// em_mm_tw_<type>_<a><b><bn>: a = k (A is [M][K]) or m ([K][M]), b = k ([N][K]) or n ([K][N]),
// bn = w (256-column tiles) or n (128).
#define TW_KERNEL(name, TY, TA, TB, BN)                                                            \
    extern "C" __global__ void __launch_bounds__(384, 1)                                           \
        name(const __grid_constant__ em_tmap ma, const __grid_constant__ em_tmap mb, void *c,      \
             int M, int N, int K, mmep ep)                                                         \
    {                                                                                              \
        tw_matmul<TY, TA, TB, BN>(&ma, &mb, c, M, N, K, ep);                                       \
    }
#define TW_LAYOUTS(ty, TY, BN, bn)                                                                 \
    TW_KERNEL(em_mm_tw_##ty##_kk##bn, TY, 0, 0, BN)                                                \
    TW_KERNEL(em_mm_tw_##ty##_kn##bn, TY, 0, 1, BN)                                                \
    TW_KERNEL(em_mm_tw_##ty##_mk##bn, TY, 1, 0, BN)                                                \
    TW_KERNEL(em_mm_tw_##ty##_mn##bn, TY, 1, 1, BN)
TW_LAYOUTS(bf16, 1, 256, w)
TW_LAYOUTS(bf16, 1, 128, n)
TW_LAYOUTS(f16, 0, 256, w)
TW_LAYOUTS(f16, 0, 128, n)
TW_KERNEL(em_mm_tw_tf32_kkw, 2, 0, 0, 256)
TW_KERNEL(em_mm_tw_tf32_kkn, 2, 0, 0, 128)
// ---- TF32 with an MN-major operand ---------------------------------------------------------------
// wgmma reads TF32 from shared memory K-major only, so the MN-major operand X ([K][R], R
// contiguous) becomes wgmma's A operand, loaded from shared memory into registers in fragment
// order, and the K-major one Y ([C][K]) stays the B operand read through its descriptor:
// D[r][c] = sum over k of X[k][r] Y[c][k]. SW = 0: X is the product's A stored [K][M] (R = M,
// C = N) and c[r][c] = D; SW = 1: X is the product's B stored [K][N] (R = N, C = M) and
// c[c][r] = D (the product computed transposed, C^T = B^T A^T). X's stage tile is 4 boxes of
// 32 r x 32 k (4 KiB each, one 128-byte row per k, its 16-byte chunk j at position j ^ (k % 8)),
// in the 16 KiB the K-major kernels give their A tile; Y's tile is the B tile of those kernels.
// A fragment (m64k8, per warp 16 rows): a0 (row lane/4, k lane%4), a1 (row + 8), a2 (k + 4),
// a3 (both). Rows are permuted within each 32-row box so that a warp's 32 loads of one register
// fall on 32 different banks (tw_rs_row); the store maps them back.
#define TW_RS_X_BYTES 4096

// Row of the 128-row tile held by register row r (0..15) of warp w in consumer warpgroup cw.
__device__ __forceinline__ int tw_rs_row(int cw, int w, int r)
{
    const int i = r & 7, chunk = 2 * (w & 1) + (r >> 3) + 4 * (i >> 2);
    return cw * 64 + (w >> 1) * 32 + 4 * chunk + (i & 3);
}

template <int BN>
__device__ __forceinline__ void tw_rs_mma(float *d, const unsigned *a, unsigned long long db)
{
    if constexpr (BN == 256)
        WGMMA_RS_256("m64n256k8.f32.tf32.tf32");
    else
        WGMMA_RS_128("m64n128k8.f32.tf32.tf32");
}

// One stage: the 16 fragment registers (4 k steps) from X's tile at sx, then the 4 products with
// Y's tile at sy, committed as one batch. off: this thread's byte offsets of (a0, a1, a2, a3) in
// the first k step (the next steps are 8 rows, 1024 bytes, on).
template <int BN>
__device__ __forceinline__ void tw_rs_stage(float *d, unsigned sx, unsigned sy,
                                            const unsigned *off, unsigned *a)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("ld.shared.b32 %0, [%1];\n"
                         : "=r"(a[4 * kk + e])
                         : "r"(sx + off[e] + kk * 1024));
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; kk++) tw_rs_mma<BN>(d, a + 4 * kk, tw_desc(sy + kk * 32, 8192));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// SW = 1's store, c[col][r] = D[r][col] (rows of c R long). Per column a warp holds its 16 rows
// as two runs of 8 (tw_rs_row); the 4 lanes of one run (lane / 4 = 4 g + s, s = 0..3, one q)
// hold rows rb + s and rb + 4 + s of columns col and col + 1, and trade values in three
// shuffles so that lane s holds rows rb + 4 (s % 2) .. + 3 of column col + s / 2: one 16-byte
// store where R is a multiple of 4 and the rows lie inside (a warp store writes 16 whole
// 32-byte sectors), scalars elsewhere.
__device__ __forceinline__ float tw_sel4(const float *v, int i)
{
    return i & 2 ? (i & 1 ? v[3] : v[2]) : (i & 1 ? v[1] : v[0]);
}

template <int BN>
__device__ __forceinline__ void tw_rs_store_t(const float *d, float *c, int R, int C, int mt,
                                              int nt, int cw, int w, int lane, const mmep &ep)
{
    const int q = lane & 3, s = (lane >> 2) & 3;
    const i64 rb = (i64)mt * 128 + tw_rs_row(cw, w, 4 * (lane >> 4));
    const i64 rt = rb + 4 * (s & 1); // the first of the 4 rows this lane stores
    const bool vec = (R & 3) == 0 && ((unsigned long long)c & 15) == 0 && rt + 3 < R;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const i64 col = (i64)nt * BN + 8 * j + 2 * q;
        // v[2h + e]: row rb + 4h + s, column col + e
        float v[4] = {d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]};
        if (ep.on) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const i64 r = rb + 4 * (i >> 1) + s, cc = col + (i & 1);
                if (r < R && cc < C) v[i] = ep_apply<2>(ep, v[i], r, cc * R + r);
            }
        }
        // o[u] = lane u's v[p(s)], p swapping the two index bits: row rt + u, column col + s / 2
        float o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int u = s ^ k;
            const float send = tw_sel4(v, ((u & 1) << 1) | (u >> 1));
            const float got = k ? __shfl_xor_sync(0xffffffffu, send, k << 2) : send;
#pragma unroll
            for (int i = 0; i < 4; i++) o[i] = i == u ? got : o[i];
        }
        const i64 ct = col + (s >> 1);
        if (ct >= C) continue;
        float *p = c + ct * R + rt;
        if (vec) // in asm: a float4 assignment here compiled to four 4-byte stores
            asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(o[0]),
                         "f"(o[1]), "f"(o[2]), "f"(o[3])
                         : "memory");
        else
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (rt + i < R) p[i] = o[i];
    }
}

template <int BN, int SW>
__device__ void tw_rs_matmul(const em_tmap *mx, const em_tmap *my, float *c, int R, int C, int K,
                             const mmep &ep)
{
    constexpr int STAGE = TW_A_BYTES + BN * 128, BK = 32;
    const unsigned base = tw_start(STAGE);
    const int tid = threadIdx.x, wg = tid >> 7;
    const int tm = (R + 127) / 128, tn = (C + BN - 1) / BN, tiles = tm * tn;
    const int kts = (K + BK - 1) / BK;
    if (wg == 0) {
        tw_regs_producer();
        if (tid == 0)
            tw_produce(base, STAGE, STAGE, tm, tn, kts,
                       [&](unsigned sx, unsigned full, int mt, int nt, int kt) {
#pragma unroll
                           for (int j = 0; j < 4; j++)
                               tma_load_2d(sx + TW_RS_X_BYTES * j, mx, mt * 128 + 32 * j, kt * BK,
                                           full);
                           tma_load_2d(sx + TW_A_BYTES, my, kt * BK, nt * BN, full);
                       });
    } else {
        tw_regs_consumer();
        const int cw = wg - 1, w = (tid >> 5) & 3, lane = tid & 31, q = lane & 3;
        // byte offsets of a0..a3: box, k row (q or q + 4), swizzled chunk, word
        unsigned off[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = tw_rs_row(cw, w, (lane >> 2) + 8 * (e & 1)), k = q + 4 * (e >> 1);
            off[e] = (r >> 5) * TW_RS_X_BYTES + k * 128 + ((((r & 31) >> 2) ^ k) << 4) + (r & 3) * 4;
        }
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt;
            tw_tile(t, tm, tn, mt, nt);
            float d[BN / 2];
#pragma unroll
            for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
            unsigned fa[16], fb[16]; // two register sets: one batch stays in flight
            tw_kloop(base, STAGE, kts, it, lane, [&](unsigned sx, int kt) {
                if (kt & 1)
                    tw_rs_stage<BN>(d, sx, sx + TW_A_BYTES, off, fb);
                else
                    tw_rs_stage<BN>(d, sx, sx + TW_A_BYTES, off, fa);
            });
            if constexpr (SW) {
                tw_rs_store_t<BN>(d, c, R, C, mt, nt, cw, w, lane, ep);
                continue;
            }
            // d[4j + e]: register row w*16 + lane/4 (+8 for e >= 2), column 8j + 2q (+1 odd e)
            const i64 cc0 = (i64)nt * BN + 2 * q;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const i64 r = (i64)mt * 128 + tw_rs_row(cw, w, (lane >> 2) + 8 * h);
                if (r >= R) continue;
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    const i64 col = cc0 + j * 8;
                    if (col >= C) continue;
                    float x = d[4 * j + 2 * h], y = d[4 * j + 2 * h + 1];
                    const bool two = col + 1 < C;
                    if (ep.on) {
                        x = ep_apply<2>(ep, x, col, r * C + col);
                        if (two) y = ep_apply<2>(ep, y, col + 1, r * C + col + 1);
                    }
                    float *p = c + r * C + col;
                    if (two && (C & 1) == 0)
                        *(float2 *)p = make_float2(x, y);
                    else {
                        p[0] = x;
                        if (two) p[1] = y;
                    }
                }
            }
        }
    }
}

// em_mm_tw_tf32_<a><b><bn>: mk (A stored [K][M], B [N][K]) or kn (A [M][K], B [K][N]); the
// arguments are X's map, Y's, c, R, C, K (above).
TMAP_F32_KERNEL(em_mm_tw_tf32_mkw, tw_rs_matmul<256, 0>)
TMAP_F32_KERNEL(em_mm_tw_tf32_mkn, tw_rs_matmul<128, 0>)
TMAP_F32_KERNEL(em_mm_tw_tf32_knw, tw_rs_matmul<256, 1>)
TMAP_F32_KERNEL(em_mm_tw_tf32_knn, tw_rs_matmul<128, 1>)
// ---- convolution as an implicit GEMM on the same pipeline --------------------------------------
// 2-D, stride 1, any padding and dilation, C input channels a multiple of 64, x and w
// channels-last: y[n][m][oh][ow] = bias[m] + sum over (kh, kw, c) of w[m][kh][kw][c] *
// x[n][oh - ph + kh dh][ow - pw + kw dw][c]. A is w as [Cout][Kh Kw C] (a 2-D map, K-major, as
// the matmul's A). B, for k tile kt (tap kt / (C / 64), 64 channels from c0) and a column tile
// (image n, output rows oh0 .. oh0 + BH, columns ow0 .. ow0 + BW), is one box {64, BW, BH, 1} of
// x's 4-D map [N][H][W][C] at (c0, ow0 - pw + kw dw, oh0 - ph + kh dh, n): the copy engine
// zero-fills what lies off the image (negative coordinates too), which is the padding. The box's
// BW BH rows (<= BN) are the tile's columns; the columns past them are never stored.
template <int TY, int BN>
__device__ void tw_conv(const em_tmap *ma, const em_tmap *mb, unsigned short *y,
                        const unsigned short *bias, const twconv &g)
{
    constexpr int STAGE = TW_A_BYTES + BN * 128;
    const unsigned base = tw_start(STAGE);
    const int tid = threadIdx.x, wg = tid >> 7;
    const int tm = (g.Cout + 127) / 128, tn = g.ntiles, tiles = tm * tn;
    if (wg == 0) {
        tw_regs_producer();
        if (tid == 0)
            tw_produce(base, STAGE, TW_A_BYTES + g.BW * g.BH * 128, tm, tn, g.kts,
                       [&](unsigned sa, unsigned full, int mt, int nt, int kt) {
                           int n, oh0, ow0;
                           twc_cols(g, nt, n, oh0, ow0);
                           const int tap = kt / g.cpt, kh = tap / g.KW;
                           const int c0 = (kt - tap * g.cpt) * 64, kw = tap - kh * g.KW;
                           tma_load_2d(sa, ma, kt * 64, mt * 128, full);
                           tma_load_4d(sa + TW_A_BYTES, mb, c0, ow0 - g.pw + kw * g.dw,
                                       oh0 - g.ph + kh * g.dh, n, full);
                       });
    } else {
        tw_regs_consumer();
        const int cw = wg - 1, w = (tid >> 5) & 3, lane = tid & 31;
        const long long plane = (long long)g.OH * g.OW;
        // column pairs stored as 4 bytes: both in one box row and 4-byte aligned
        const bool pairs = (g.BW & 1) == 0 && (g.OW & 1) == 0 && ((unsigned long long)y & 3) == 0;
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int mt, nt, n, oh0, ow0;
            tw_tile(t, tm, tn, mt, nt);
            twc_cols(g, nt, n, oh0, ow0);
            float d[BN / 2];
            tw_consume<TY, 0, 0, BN>(d, base, g.kts, it, cw, lane);
            // d[4j + e]: row w*16 + lane/4 (+8 for e >= 2), column 8j + 2 (lane % 4) (+1 odd e)
            const int r0 = mt * 128 + cw * 64 + w * 16 + (lane >> 2);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = r0 + h * 8;
                if (m >= g.Cout) continue;
                const float b = bias ? half_to_f<TY>(bias[m]) : 0.f;
                unsigned short *ym = y + ((long long)n * g.Cout + m) * plane;
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    const float v0 = d[4 * j + 2 * h] + b, v1 = d[4 * j + 2 * h + 1] + b;
                    const int col = j * 8 + (lane & 3) * 2;
                    if (pairs) { // col, col + 1: one box row, both in the image or neither
                        const int bh = col / g.BW, oh = oh0 + bh, ow = ow0 + col - bh * g.BW;
                        if (bh < g.BH && oh < g.OH && ow < g.OW)
                            *(unsigned *)(ym + oh * g.OW + ow) = pack2<TY>(v0, v1);
                        continue;
                    }
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int bh = (col + e) / g.BW, oh = oh0 + bh;
                        const int ow = ow0 + col + e - bh * g.BW;
                        if (bh < g.BH && oh < g.OH && ow < g.OW)
                            ym[oh * g.OW + ow] = f_to_half<TY>(e ? v1 : v0);
                    }
                }
            }
        }
    }
}

// em_conv_tw_<type>_<bn>: bn = w (256-column tiles) or n (128).
#define TWC_KERNEL(name, TY, BN)                                                                   \
    extern "C" __global__ void __launch_bounds__(384, 1)                                           \
        name(const __grid_constant__ em_tmap ma, const __grid_constant__ em_tmap mb,               \
             unsigned short *y, const unsigned short *bias, twconv g)                              \
    {                                                                                              \
        tw_conv<TY, BN>(&ma, &mb, y, bias, g);                                                     \
    }
TWC_KERNEL(em_conv_tw_bf16_w, 1, 256)
TWC_KERNEL(em_conv_tw_bf16_n, 1, 128)
TWC_KERNEL(em_conv_tw_f16_w, 0, 256)
TWC_KERNEL(em_conv_tw_f16_n, 0, 128)

#endif

// dst[c][r] = src[r][c] for 4-byte elements (TF32 operands stored MN-major): src [rows][cols] with row stride lds, dst
// contiguous [cols][rows]; 32 x 32 tiles through shared memory (padded against bank conflicts).
template <typename T>
__device__ void transpose_tile(const T *src, T *dst, i64 rows, i64 cols, i64 lds)
{
    __shared__ T t[32][33];
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

extern "C" __global__ void em_transpose_4(const unsigned *src, unsigned *dst, i64 rows, i64 cols,
                                          i64 lds)
{
    transpose_tile(src, dst, rows, cols, lds);
}
