// cuda_minmax.h: the min and max that nvcc declares for host and device code (CUDA's math_functions.hpp, seen
// only under nvcc), for the code g++ compiles: the wrapper unit of a GPU build and all of CPU mode. One overload
// for each pair of argument types CUDA has, returning what CUDA's does (min(int, unsigned) is unsigned, a float
// and a double give a double), so that `min(cdiv(n, threads), 64u)` resolves, or fails, as under nvcc.
#pragma once
#include <cmath>

#define COURSE_MINMAX(R, A, B) \
  inline R min(A a, B b) { return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); } \
  inline R max(A a, B b) { return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); }
COURSE_MINMAX(int, int, int)
COURSE_MINMAX(unsigned int, unsigned int, unsigned int)
COURSE_MINMAX(unsigned int, int, unsigned int)
COURSE_MINMAX(unsigned int, unsigned int, int)
COURSE_MINMAX(long, long, long)
COURSE_MINMAX(unsigned long, unsigned long, unsigned long)
COURSE_MINMAX(unsigned long, long, unsigned long)
COURSE_MINMAX(unsigned long, unsigned long, long)
COURSE_MINMAX(long long, long long, long long)
COURSE_MINMAX(unsigned long long, unsigned long long, unsigned long long)
COURSE_MINMAX(unsigned long long, long long, unsigned long long)
COURSE_MINMAX(unsigned long long, unsigned long long, long long)
#undef COURSE_MINMAX
// floating point as CUDA's fmin and fmax: a NaN loses to a number
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }
inline unsigned int umin(unsigned int a, unsigned int b) { return min(a, b); }
inline unsigned int umax(unsigned int a, unsigned int b) { return max(a, b); }
inline long long llmin(long long a, long long b) { return min(a, b); }
inline long long llmax(long long a, long long b) { return max(a, b); }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return min(a, b); }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return max(a, b); }
