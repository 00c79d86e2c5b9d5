cuBLAS is about 6 times faster because it is written by NVIDIA in assembly.
