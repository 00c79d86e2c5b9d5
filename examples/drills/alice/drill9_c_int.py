def c_int(v):
    return (v + 2**31) % 2**32 - 2**31
    ### END SOLUTION
