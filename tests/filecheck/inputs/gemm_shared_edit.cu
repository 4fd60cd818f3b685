// A hand edit of `tessel cuda gemm_shared` (the generated kernel's name and parameters, a
// different body: no shared memory), for compile_cuda_file.txt: --cuda compiles this file.
extern "C" __global__ void __launch_bounds__(256) gemm_shared(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  const int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < 1024; ++k)
    acc += A[i * 1024 + k] * B[k * 1024 + j];
  C[i * 1024 + j] = acc;
}
