I will write a histogram kernel. L0 is a loop, L1 a thread per pixel, L2 with blocks, L3 in CUDA. I will test
it against torch.bincount.
