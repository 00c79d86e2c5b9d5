The race is the one a translation would most likely miss. `to_cuda` noted it ("`counts[int(x[i])] += 1`
reads, adds and writes ... on a GPU threads adding into the same element race"), but the text is valid C and
the translated histogram counted every value in CPU mode, where a block's threads run one at a time; only the
GPU loses increments, and most of them when every thread adds into one count. The overflow is next: `i*w + j`
is right on every tensor I can test here, and wrong only past 2**31 elements (a 46,341 x 46,341 image).
The double literal changes few bytes (4 of the photo's pixels) and `//` only negative operands, so an LLM
copying the text would pass a quick test too. The chained guard `0 < i < n - 1` compiles in C and silently
reads x[-1] and x[n]; the smooth check's memory test and the ends caught it. What catches them: atomicAdd and
a run on a GPU with many threads on one count; a long long index and a test past 2**31; the f suffix; a
memory check.
