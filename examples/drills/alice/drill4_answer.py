I had no GPU, so I used the host's figures: 34 µs at 32 threads a block, 18 at 64, about 11 from 128 to 512
and 8.6 at 1024. Threads run in warps of 32, and an SM hides the latency of memory loads by switching between
its resident warps; this kernel only loads and stores, so it needs many of them. An SM can hold at most 32
blocks, so with 32-thread blocks it only gets 32 warps, half what it can hold; 64-thread blocks fill it, and
from 128 on it is full, hence flat. At 1024 there are far fewer blocks to schedule, which is probably the last
gain. The forgetful timer said 0.09 ms for 20 ms of work: it only timed the launch, because the launch
returns before the work is done.
