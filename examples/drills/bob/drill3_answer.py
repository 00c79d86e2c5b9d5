Python checks the index and CUDA does not. The far one crashed because it was too far.
