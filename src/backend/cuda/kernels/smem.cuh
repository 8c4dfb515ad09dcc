// The block's dynamic shared memory (the bytes the launch asks for), 16-byte aligned. The CPU
// emulators (scripts/cuda_emu) define this header's guard and hand out their block's buffer.
#ifndef EMBER_CUDA_SMEM_CUH
#define EMBER_CUDA_SMEM_CUH
template <typename T> __device__ __forceinline__ T *dyn_smem()
{
    extern __shared__ __align__(16) unsigned char em_dyn_smem[];
    return (T *)em_dyn_smem;
}
#endif
