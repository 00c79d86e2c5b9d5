They were all the same for me. The GPU differs because floating point is not exact, so I used the fused
multiply-add, which rounds only once and is therefore the most exact.
