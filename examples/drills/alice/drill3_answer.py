Python's runner checks every index and raised for the threads past the last pixel. The GPU does not check
indices: the near miss wrote 5 bytes past the output, but PyTorch's caching allocator had given the tensor
a bigger block of a 2 MB segment, so the bytes landed in memory the process owns and nothing happened. The
far write went 256 MiB past, into memory that is not mapped at all, so the GPU raised an illegal memory
access, and the process's CUDA context was broken afterwards (that is why it ran in a child). compute-sanitizer
only knows CUDA's allocations: with the caching allocator the whole segment is one allocation and the write is
inside it; with PYTORCH_NO_CUDA_MEMORY_CACHING=1 each tensor is its own exact allocation and the write past
its end is reported.
