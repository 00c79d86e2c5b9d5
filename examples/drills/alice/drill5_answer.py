The host measured 436 µs for the naive kernel, 71 µs for cuBLAS in float32 and 31 µs with TF32: about 6x and
14x. My kernel reads a whole row and a whole column from global memory for every output element, two loads
per multiply-add, and every value is read again by every thread that needs it. cuBLAS loads tiles into shared
memory and registers once and reuses each value many times, so it is limited by arithmetic and not by memory.
TF32 is another thing: the tensor cores with inputs rounded to 10 bits, so part of that speed is paid in
accuracy.
