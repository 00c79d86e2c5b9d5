def time_ms(fn, *args, warmup=3, reps=20):
    times = []
    for _ in range(reps):
        synchronize()
        start = time.perf_counter()
        fn(*args)
        synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.mean(times)
