More threads is faster because more work is done at the same time. My timer said almost nothing for every
size, so the kernel is very fast.
