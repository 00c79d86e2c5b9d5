In CPU mode both runs raised at the launch line, because a CPU-mode launch finishes its kernel before it
returns. On the host, with CUDA_LAUNCH_BLOCKING=0 the error appears at `int(grey.sum())`, the next CUDA call,
because the launch only queued the kernel and returned; with 1 the launch waits and raises itself. The near
overrun raised nothing in any run. Child processes are needed because CUDA reads the variable once, when it
starts in a process, and because after an illegal memory access that process cannot use the GPU any more.
Blocking costs the overlap: normally the CPU queues the next launch while the GPU runs the previous kernel;
with blocking every launch waits for its kernel, so launch time and kernel time add up.
