// cuda_cpu.h: CUDA's built-in names with CPU meanings, for load_cuda's CPU mode (course/toolchain/cpu.py).
//
// course/toolchain/cpu.py compiles a student's unchanged CUDA source as C++ against this header. It rewrites
// each launch `k<<<grid, block, shmem, stream>>>(args)` into a call of cuda_cpu::make_launch, which
// runs the whole grid on the CPU: blocks one after another, the threads of a block one after
// another, on fibers (stacks of their own) so that __syncthreads() is a real barrier. As on a GPU,
// no order is promised: blocks run in a random order, and so do the warps of a block between two
// barriers (the lanes of a warp in order). The fibers, the launch checks and the profiler event live
// in cuda_cpu_runtime.cpp, compiled once and linked in.
//
// Results are real; timings are not GPU timings; races and out-of-bounds accesses behave
// differently (a thread runs until it waits at a barrier or ends, before the next one starts).
// What cannot run here (warp shuffles and votes, cooperative groups, clock64, streams, ...) is
// declared with __attribute__((error)), so using it fails to compile, saying "not available in CPU mode".
#pragma once

// before the macros below: torch's headers never see them. The split build's kernel unit (course/toolchain/split.py)
// defines CUDA_CPU_NO_TORCH: it holds only kernels and what they use, and compiles in a fraction of the time.
#ifndef CUDA_CPU_NO_TORCH
#include <ATen/core/Tensor.h>
#endif

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>  // the float overloads of sqrt, exp, ... in the global namespace, as CUDA has them
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define COURSE_CPU_MODE 1

#define CUDA_CPU_HIDDEN __attribute__((visibility("hidden")))
#define CUDA_CPU_UNAVAILABLE(what) \
  __attribute__((error(what " is not available in CPU mode: it needs a GPU (see course/toolchain/cuda_cpu.h)")))

// ---- function and variable qualifiers ----------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __shared__ static  // one copy, shared by the threads of the block that runs (blocks run in turn)
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
// __restrict__ is a g++ keyword already.

// ---- dim3, uint3 and the vector types -----------------------------------------------------------
struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define CUDA_CPU_VEC(name, T, A2, A4)                                                               \
  struct name##1 { T x; };                                                                          \
  struct alignas(A2) name##2 { T x, y; };                                                           \
  struct name##3 { T x, y, z; };                                                                    \
  struct alignas(A4) name##4 { T x, y, z, w; };                                                     \
  inline name##1 make_##name##1(T x) { return name##1{x}; }                                         \
  inline name##2 make_##name##2(T x, T y) { return name##2{x, y}; }                                 \
  inline name##3 make_##name##3(T x, T y, T z) { return name##3{x, y, z}; }                         \
  inline name##4 make_##name##4(T x, T y, T z, T w) { return name##4{x, y, z, w}; }
CUDA_CPU_VEC(char, signed char, 2, 4)
CUDA_CPU_VEC(uchar, unsigned char, 2, 4)
CUDA_CPU_VEC(short, short, 4, 8)
CUDA_CPU_VEC(ushort, unsigned short, 4, 8)
CUDA_CPU_VEC(int, int, 8, 16)
CUDA_CPU_VEC(float, float, 8, 16)
CUDA_CPU_VEC(longlong, long long, 16, 16)
CUDA_CPU_VEC(ulonglong, unsigned long long, 16, 16)
CUDA_CPU_VEC(double, double, 16, 16)
#undef CUDA_CPU_VEC
// uint3 is the struct above; its siblings by hand.
struct uint1 { unsigned int x; };
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
inline uint1 make_uint1(unsigned int x) { return uint1{x}; }
inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return uint4{x, y, z, w}; }

// ---- the CUDA runtime API, as far as it means something on the CPU ------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorIllegalAddress = 700,
  cudaErrorAssert = 710,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
struct CUevent_st {
  double seconds;
};
typedef CUevent_st* cudaEvent_t;
#define cudaStreamDefault 0x00
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

namespace cuda_cpu {
namespace detail {
// Defined in cuda_cpu_runtime.cpp (one copy per compiled module).
struct Block {
  unsigned int next;     // the next slot to start: warp warp_order[next / 32], lane next % 32
  unsigned int nslots;   // 32 times the number of warps
  unsigned int nthreads; // threads per block
  unsigned int tid;      // the thread running now (linear index in the block)
  bool one_d;            // blockDim.y == blockDim.z == 1
  bool alone;            // only thread alone_tid runs (a watched thread, run alone: course/harness/origin.py)
  unsigned int alone_tid;
  unsigned char warp_order[32];  // the warps in the order they run (shuffled for each block)
};
extern Block block CUDA_CPU_HIDDEN;
extern void* dynamic_smem CUDA_CPU_HIDDEN;
CUDA_CPU_HIDDEN void launch(const char* name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                            void (*threads)(void*), void* body);
CUDA_CPU_HIDDEN cudaError_t get_last_error(bool reset);
CUDA_CPU_HIDDEN const char* error_string(cudaError_t e);
CUDA_CPU_HIDDEN const char* error_name(cudaError_t e);
[[noreturn]] CUDA_CPU_HIDDEN void raise_error(cudaError_t e, const char* file, const char* func, int line);
CUDA_CPU_HIDDEN void warn_error(cudaError_t e, const char* file, const char* func, int line);
CUDA_CPU_HIDDEN void set_max_dynamic_smem(int bytes);
CUDA_CPU_HIDDEN int barrier(int kind, int pred);  // kind 1: __syncthreads*, 2: __syncwarp
// course/toolchain/cpu.py puts a call after each __shared__ array a kernel declares: the launch then knows
// whether its kernel wrote shared memory (a tiled exercise's check asks).
CUDA_CPU_HIDDEN void shared_mark(void* p, size_t bytes);
// course/toolchain/cpu.py puts a call after each declaration of a kernel's index variables (those computed from
// threadIdx and blockIdx): a thread run alone (course/harness/origin.py) reports their values.
CUDA_CPU_HIDDEN void watch_value(const char* name, double value, bool integral);
template <class T>
inline void watch(const char* name, const T& value) {
  if constexpr (std::is_arithmetic_v<T>) {
    if (block.alone) watch_value(name, static_cast<double>(value), std::is_integral_v<T>);
  }
}
}  // namespace detail
}  // namespace cuda_cpu

extern uint3 threadIdx CUDA_CPU_HIDDEN;
extern uint3 blockIdx CUDA_CPU_HIDDEN;
extern dim3 blockDim CUDA_CPU_HIDDEN;
extern dim3 gridDim CUDA_CPU_HIDDEN;
constexpr int warpSize = 32;

inline cudaError_t cudaGetLastError() { return cuda_cpu::detail::get_last_error(true); }
inline cudaError_t cudaPeekAtLastError() { return cuda_cpu::detail::get_last_error(false); }
inline const char* cudaGetErrorString(cudaError_t e) { return cuda_cpu::detail::error_string(e); }
inline const char* cudaGetErrorName(cudaError_t e) { return cuda_cpu::detail::error_name(e); }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }  // a CPU launch has finished when it returns
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
template <class T>
inline cudaError_t cudaMalloc(T** p, size_t n) {
  *p = static_cast<T*>(std::aligned_alloc(256, (n + 255) / 256 * 256 + 256));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T>
inline cudaError_t cudaMallocManaged(T** p, size_t n, unsigned int = 1) { return cudaMalloc(p, n); }
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind k, cudaStream_t = 0) {
  return cudaMemcpy(dst, src, n, k);
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { std::memset(p, v, n); return cudaSuccess; }
template <class T>
inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, size_t n, size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice) {
  if (offset + n > sizeof(T)) return cudaErrorInvalidValue;
  std::memcpy(reinterpret_cast<char*>(&symbol) + offset, src, n);
  return cudaSuccess;
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t n, size_t offset = 0,
                                        cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  if (offset + n > sizeof(T)) return cudaErrorInvalidValue;
  std::memcpy(dst, reinterpret_cast<const char*>(&symbol) + offset, n);
  return cudaSuccess;
}
template <class F>
inline cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) cuda_cpu::detail::set_max_dynamic_smem(value);
  return cudaSuccess;
}
// Events time on the CPU clock (not GPU timings).
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new CUevent_st{0.0}; return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = 0) {
  e->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = static_cast<float>((b->seconds - a->seconds) * 1e3);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t*) CUDA_CPU_UNAVAILABLE("cudaStreamCreate (streams)");
cudaError_t cudaStreamCreateWithFlags(cudaStream_t*, unsigned int) CUDA_CPU_UNAVAILABLE("cudaStreamCreateWithFlags (streams)");
cudaError_t cudaStreamDestroy(cudaStream_t) CUDA_CPU_UNAVAILABLE("cudaStreamDestroy (streams)");
cudaError_t cudaLaunchCooperativeKernel(...) CUDA_CPU_UNAVAILABLE("cudaLaunchCooperativeKernel");

// PyTorch's current CUDA stream is the default one: launches on it run as on stream 0.
namespace c10 { namespace cuda {
struct CUDAStream {
  cudaStream_t stream() const { return nullptr; }
  operator cudaStream_t() const { return nullptr; }
  void synchronize() const {}
};
inline CUDAStream getCurrentCUDAStream(int = -1) { return CUDAStream{}; }
inline CUDAStream getDefaultCUDAStream(int = -1) { return CUDAStream{}; }
} }
namespace at { namespace cuda {
using c10::cuda::CUDAStream;
using c10::cuda::getCurrentCUDAStream;
using c10::cuda::getDefaultCUDAStream;
} }

// What a kernel may ask for, as CUDA's limits (the CPU has no such limits, but launches check them).
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3];
  int major, minor, multiProcessorCount, maxThreadsPerMultiProcessor;
};
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return cudaErrorInvalidValue;
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "CPU (load_cuda's CPU mode)");
  p->totalGlobalMem = size_t(1) << 34;
  p->sharedMemPerBlock = 48 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->major = 9, p->minor = 0;  // what the course's GPU host has
  p->multiProcessorCount = 1;  // blocks run one at a time
  p->maxThreadsPerMultiProcessor = 2048;
  return cudaSuccess;
}
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxBlockDimX = 2, cudaDevAttrMaxGridDimX = 5,
  cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrWarpSize = 10, cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39, cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return cudaErrorInvalidValue;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// What c10/cuda/CUDAException.h gives (cuda_begin includes it; CPU mode replaces the include).
#define C10_CUDA_CHECK(EXPR) \
  do { const cudaError_t cuda_cpu_err_ = (EXPR); \
       if (cuda_cpu_err_ != cudaSuccess) ::cuda_cpu::detail::raise_error(cuda_cpu_err_, __FILE__, __func__, __LINE__); } while (0)
#define C10_CUDA_CHECK_WARN(EXPR) \
  do { const cudaError_t cuda_cpu_err_ = (EXPR); \
       if (cuda_cpu_err_ != cudaSuccess) ::cuda_cpu::detail::warn_error(cuda_cpu_err_, __FILE__, __func__, __LINE__); } while (0)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
#define C10_CUDA_IGNORE_ERROR(EXPR) do { (void)(EXPR); (void)cudaGetLastError(); } while (0)
#define AT_CUDA_CHECK(EXPR) C10_CUDA_CHECK(EXPR)

// ---- barriers -----------------------------------------------------------------------------------
inline void __syncthreads() { cuda_cpu::detail::barrier(1, 0); }
inline int __syncthreads_count(int pred) { return cuda_cpu::detail::barrier(1, pred != 0); }
inline int __syncthreads_and(int pred) { return cuda_cpu::detail::barrier(3, pred != 0); }
inline int __syncthreads_or(int pred) { return cuda_cpu::detail::barrier(1, pred != 0) != 0; }
inline void __syncwarp(unsigned int = 0xffffffffu) { cuda_cpu::detail::barrier(2, 0); }
// Threads run one at a time, so every write is seen by every later read: fences have nothing to do.
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

// ---- atomics: the overloads CUDA has. Threads run one at a time, so plain read-modify-write is atomic.
#define CUDA_CPU_ATOMIC(name, T, expr) \
  inline T name(T* address, T val) { T old = *address; *address = (expr); return old; }
#define CUDA_CPU_ATOMIC_ALL(name, expr, ...) \
  CUDA_CPU_ATOMIC(name, int, expr) CUDA_CPU_ATOMIC(name, unsigned int, expr) \
  CUDA_CPU_ATOMIC(name, unsigned long long int, expr) __VA_ARGS__
CUDA_CPU_ATOMIC_ALL(atomicAdd, old + val, CUDA_CPU_ATOMIC(atomicAdd, float, old + val) CUDA_CPU_ATOMIC(atomicAdd, double, old + val))
CUDA_CPU_ATOMIC(atomicSub, int, old - val)
CUDA_CPU_ATOMIC(atomicSub, unsigned int, old - val)
CUDA_CPU_ATOMIC_ALL(atomicExch, val, CUDA_CPU_ATOMIC(atomicExch, float, val))
CUDA_CPU_ATOMIC_ALL(atomicMin, val < old ? val : old, CUDA_CPU_ATOMIC(atomicMin, long long int, val < old ? val : old))
CUDA_CPU_ATOMIC_ALL(atomicMax, val > old ? val : old, CUDA_CPU_ATOMIC(atomicMax, long long int, val > old ? val : old))
CUDA_CPU_ATOMIC_ALL(atomicAnd, old & val)
CUDA_CPU_ATOMIC_ALL(atomicOr, old | val)
CUDA_CPU_ATOMIC_ALL(atomicXor, old ^ val)
CUDA_CPU_ATOMIC(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUDA_CPU_ATOMIC(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef CUDA_CPU_ATOMIC_ALL
#undef CUDA_CPU_ATOMIC
#define CUDA_CPU_CAS(T) \
  inline T atomicCAS(T* address, T compare, T val) { T old = *address; if (old == compare) *address = val; return old; }
CUDA_CPU_CAS(int)
CUDA_CPU_CAS(unsigned int)
CUDA_CPU_CAS(unsigned long long int)
CUDA_CPU_CAS(unsigned short int)
#undef CUDA_CPU_CAS
#define CUDA_CPU_SCOPED(name) \
  template <class... A> inline auto name##_block(A... a) { return name(a...); } \
  template <class... A> inline auto name##_system(A... a) { return name(a...); }
CUDA_CPU_SCOPED(atomicAdd) CUDA_CPU_SCOPED(atomicSub) CUDA_CPU_SCOPED(atomicExch) CUDA_CPU_SCOPED(atomicMin)
CUDA_CPU_SCOPED(atomicMax) CUDA_CPU_SCOPED(atomicAnd) CUDA_CPU_SCOPED(atomicOr) CUDA_CPU_SCOPED(atomicXor)
CUDA_CPU_SCOPED(atomicInc) CUDA_CPU_SCOPED(atomicDec) CUDA_CPU_SCOPED(atomicCAS)
#undef CUDA_CPU_SCOPED

// ---- math: <cmath> gives sqrtf, expf, fminf, floorf, ...; these are the CUDA-only names ---------
#include "cuda_minmax.h"  // min, max, umin, ... as nvcc declares them
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float fdividef(float a, float b) { return a / b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline unsigned int __float2uint_rn(float x) { return static_cast<unsigned int>(nearbyintf(x)); }
inline unsigned int __float2uint_rz(float x) { return static_cast<unsigned int>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned int x) { return static_cast<float>(x); }
inline int __double2int_rn(double x) { return static_cast<int>(nearbyint(x)); }
inline int __double2int_rz(double x) { return static_cast<int>(x); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }
inline int __float_as_int(float x) { int r; std::memcpy(&r, &x, 4); return r; }
inline unsigned int __float_as_uint(float x) { unsigned int r; std::memcpy(&r, &x, 4); return r; }
inline float __int_as_float(int x) { float r; std::memcpy(&r, &x, 4); return r; }
inline float __uint_as_float(unsigned int x) { float r; std::memcpy(&r, &x, 4); return r; }
inline long long __double_as_longlong(double x) { long long r; std::memcpy(&r, &x, 8); return r; }
inline double __longlong_as_double(long long x) { double r; std::memcpy(&r, &x, 8); return r; }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return static_cast<unsigned int>((static_cast<unsigned long long>(a) * b) >> 32);
}
template <class T>
inline T __ldg(const T* p) { return *p; }
inline void __trap() { __builtin_trap(); }
#ifndef CUDART_PI_F
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_INF_F __int_as_float(0x7f800000)
#define CUDART_NAN_F __int_as_float(0x7fffffff)
#define CUDART_INF __longlong_as_double(0x7ff0000000000000LL)
#endif

// ---- what needs a GPU: using it fails to compile -----------------------------------------------
#define CUDA_CPU_WARP(name) CUDA_CPU_UNAVAILABLE(#name " (a warp-level intrinsic: there are no warps on the CPU)")
template <class T> T __shfl_sync(unsigned int, T, int, int = 32) CUDA_CPU_WARP(__shfl_sync);
template <class T> T __shfl_up_sync(unsigned int, T, unsigned int, int = 32) CUDA_CPU_WARP(__shfl_up_sync);
template <class T> T __shfl_down_sync(unsigned int, T, unsigned int, int = 32) CUDA_CPU_WARP(__shfl_down_sync);
template <class T> T __shfl_xor_sync(unsigned int, T, int, int = 32) CUDA_CPU_WARP(__shfl_xor_sync);
template <class T> T __shfl(T, int, int = 32) CUDA_CPU_WARP(__shfl);
template <class T> T __shfl_up(T, unsigned int, int = 32) CUDA_CPU_WARP(__shfl_up);
template <class T> T __shfl_down(T, unsigned int, int = 32) CUDA_CPU_WARP(__shfl_down);
template <class T> T __shfl_xor(T, int, int = 32) CUDA_CPU_WARP(__shfl_xor);
unsigned int __ballot_sync(unsigned int, int) CUDA_CPU_WARP(__ballot_sync);
unsigned int __ballot(int) CUDA_CPU_WARP(__ballot);
int __any_sync(unsigned int, int) CUDA_CPU_WARP(__any_sync);
int __all_sync(unsigned int, int) CUDA_CPU_WARP(__all_sync);
int __uni_sync(unsigned int, int) CUDA_CPU_WARP(__uni_sync);
int __any(int) CUDA_CPU_WARP(__any);
int __all(int) CUDA_CPU_WARP(__all);
unsigned int __activemask() CUDA_CPU_WARP(__activemask);
unsigned int __lanemask_lt() CUDA_CPU_WARP(__lanemask_lt);
template <class T> unsigned int __match_any_sync(unsigned int, T) CUDA_CPU_WARP(__match_any_sync);
template <class T> unsigned int __match_all_sync(unsigned int, T, int*) CUDA_CPU_WARP(__match_all_sync);
template <class T> T __reduce_add_sync(unsigned int, T) CUDA_CPU_WARP(__reduce_add_sync);
template <class T> T __reduce_min_sync(unsigned int, T) CUDA_CPU_WARP(__reduce_min_sync);
template <class T> T __reduce_max_sync(unsigned int, T) CUDA_CPU_WARP(__reduce_max_sync);
unsigned int __reduce_and_sync(unsigned int, unsigned int) CUDA_CPU_WARP(__reduce_and_sync);
unsigned int __reduce_or_sync(unsigned int, unsigned int) CUDA_CPU_WARP(__reduce_or_sync);
unsigned int __reduce_xor_sync(unsigned int, unsigned int) CUDA_CPU_WARP(__reduce_xor_sync);
#undef CUDA_CPU_WARP
long long int clock64() CUDA_CPU_UNAVAILABLE("clock64 (the GPU's cycle counter)");
long long int __clock64() CUDA_CPU_UNAVAILABLE("__clock64 (the GPU's cycle counter)");
unsigned long long __globaltimer() CUDA_CPU_UNAVAILABLE("__globaltimer");
void __nanosleep(unsigned int) CUDA_CPU_UNAVAILABLE("__nanosleep (waiting for other threads)");
int __isGlobal(const void*) CUDA_CPU_UNAVAILABLE("__isGlobal");
int __isShared(const void*) CUDA_CPU_UNAVAILABLE("__isShared");

// ---- launches -----------------------------------------------------------------------------------
namespace cuda_cpu {
namespace detail {
inline void enter_thread(unsigned int t) {
  block.tid = t;
  if (block.one_d) {
    threadIdx.x = t;
  } else {
    threadIdx.x = t % blockDim.x;
    t /= blockDim.x;
    threadIdx.y = t % blockDim.y;
    threadIdx.z = t / blockDim.y;
  }
}

// Runs threads of the current block until none is left to start: warp after warp in the block's
// (shuffled) order, the lanes of a warp in order. A thread that waits at a barrier suspends this
// fiber; the runtime starts the next thread on another one.
template <class Body>
void run_threads(void* body) {
  Body& b = *static_cast<Body*>(body);
  while (block.next < block.nslots) {
    const unsigned int k = block.next++;
    const unsigned int t = (static_cast<unsigned int>(block.warp_order[k >> 5]) << 5) | (k & 31u);
    if (t >= block.nthreads) continue;  // the missing lanes of a last, partial warp
    if (block.alone && t != block.alone_tid) continue;
    enter_thread(t);
    b();
  }
}

template <class Kernel>
struct Launch {
  const char* name;
  Kernel kernel;
  dim3 grid, threads;
  size_t shmem;
  cudaStream_t stream;

  template <class... Args>
  void operator()(Args&&... args) {
    // The arguments are evaluated once, as on the GPU, and each thread gets its own copy.
    std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
    auto body = [&] { std::apply(kernel, values); };
    launch(name, grid, threads, shmem, stream, &run_threads<decltype(body)>, &body);
  }
};
}  // namespace detail

// What `kernel<<<grid, block, shmem, stream>>>` becomes: course/toolchain/cpu.py writes
// `::cuda_cpu::make_launch("kernel", [&](auto&&... a) { kernel(a...); }, grid, block, shmem, stream)`.
template <class Kernel>
inline detail::Launch<Kernel> make_launch(const char* name, Kernel kernel, dim3 grid, dim3 block,
                                          size_t shmem = 0, cudaStream_t stream = nullptr) {
  return detail::Launch<Kernel>{name, kernel, grid, block, shmem, stream};
}

// `extern __shared__ T s[];` at namespace scope becomes `static ::cuda_cpu::DynamicShared<T> s;`
// (in a function it becomes a pointer to the launch's dynamic shared memory).
template <class T>
struct DynamicShared {
  operator T*() const { return static_cast<T*>(detail::dynamic_smem); }
  T& operator[](std::ptrdiff_t i) const { return static_cast<T*>(detail::dynamic_smem)[i]; }
};
}  // namespace cuda_cpu
