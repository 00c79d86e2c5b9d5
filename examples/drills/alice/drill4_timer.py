def time_ms(fn, *args, warmup=3, reps=20):
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(reps):
        synchronize()
        start = time.perf_counter()
        fn(*args)
        synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
