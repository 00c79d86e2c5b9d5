import math


def c_div(a, b):
    return int(a / b)  # int() truncates toward zero, as C does; exact for these small ints


def c_mod(a, b):
    return int(math.fmod(a, b))
