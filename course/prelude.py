"""cuda_begin, the lecture's boilerplate every CUDA source starts with: plain text, so that the build
(course/toolchain/), compiling ahead (course/grading/run/compile.py) and course.cuda read one definition, none of them
importing another or torch."""

# The lecture's boilerplate, with lighter headers than torch/extension.h: the same names
# (torch::Tensor, torch::empty, TORCH_CHECK), half the compile time (see benchmarks/compile.py).
# cdiv is __host__ __device__: the wrapper sizes the grid with it, and a kernel may call it too.
cuda_begin = r'''
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAException.h>
#include <stdio.h>
namespace torch { using namespace at; }

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__host__ __device__ inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
'''
