def c_int(v):
    return max(-2**31, min(v, 2**31 - 1))
