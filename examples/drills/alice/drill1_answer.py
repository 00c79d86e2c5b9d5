On my machine (CPU mode) all four rungs agreed on every pixel, the edge colours included; only the
written-out FMA kernel differed, on 27 of the 317 edge colours and 2 pixels of each random image. On the GPU
the plain L3 rung is that FMA kernel: the PTX has one `mul.f32` and two `fma.rn.f32`, the SASS one FMUL and
two FFMA. A fused multiply-add rounds `a*b + c` once, PyTorch rounds the product and then the sum. Near a
whole number (the edge colours are exactly 45.0 and the like) one order lands on 45.0 and the other on
44.99999, and the conversion to uint8 truncates that to 44: a difference of one. I used `__fmul_rn` and
`__fadd_rn` in the reference's order; `-fmad=false` would do it for the whole file, which would also slow
down any other kernel in it that profits from FMAs. Here the cost is two more instructions per pixel in a
kernel that waits on memory anyway.
