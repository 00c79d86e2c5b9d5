def c_int(v):
    low = v & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low
