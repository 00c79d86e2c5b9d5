It is mechanical: to_cuda did it. The only thing to watch is that CUDA is faster, so the results can be a bit
different because of floating point.
