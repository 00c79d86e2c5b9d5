**My next kernel: a histogram of a uint8 image.** (1) Input: an image as a uint8 tensor of any shape; output:
256 int64 counts, how many values equal each byte. Reference: `torch.bincount(x.flatten().long(), minlength=256)`.
(2) L0: one loop over all values, `counts[x[i]] += 1`. Unlike grayscale, the output elements are not
independent of the loop: many values add to the same count. (3) L1: a thread per input value `i`, which adds
one to `counts[x[i]]`. (4) L2: 1D, 256 threads, `cdiv(n, 256)` blocks, `if i < n`. Threads collide on the
same count, so a plain `+=` loses updates (a race): in CUDA this needs `atomicAdd`; in Python the runner is
sequential and would hide the race, so I will test the CUDA version with images of one colour. Faster later:
each block counts into a `__shared__` histogram, then adds it to the global one. (5) L3: `unsigned char*` in,
`int*` or `unsigned long long*` out (atomicAdd has no int64 overload for signed), `torch::zeros` for the
output since every count starts at 0. (6) Checks: 1x1, a ragged 7x37, an image of a single value (every thread
hits the same count), 6 million values; compare exactly (integers). (7) Time a 2000x3000 image with
`cuda_time` against `torch.bincount`; I expect the global-atomics version to be slow on one-colour images
and the shared-memory one to be much better.
