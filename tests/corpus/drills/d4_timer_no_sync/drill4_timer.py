def time_ms(fn, *args, warmup=3, reps=20):
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
