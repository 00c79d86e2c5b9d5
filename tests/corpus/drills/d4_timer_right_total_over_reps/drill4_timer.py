def time_ms(fn, *args, warmup=3, reps=20):
    for _ in range(warmup):
        fn(*args)
    synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    synchronize()
    return (time.perf_counter() - start) * 1e3 / reps
