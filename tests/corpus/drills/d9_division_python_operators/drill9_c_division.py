def c_div(a, b):
    return a // b


def c_mod(a, b):
    return a % b
