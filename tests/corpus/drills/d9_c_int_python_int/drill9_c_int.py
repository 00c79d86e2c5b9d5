def c_int(v):
    return int(v)
