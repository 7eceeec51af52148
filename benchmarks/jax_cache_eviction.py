"""What one write into JAX's persistent compilation cache costs as the cache fills, with the eviction that
rlbench turns on (rlbench.run.compile_cache: a size bound, which also turns on JAX's file lock).

JAX's LRUCache.put (jax/_src/lru_cache.py) lists the whole folder, stats every entry and reads its access
time file, under the cache's file lock, before every write: the cost grows with the number of entries, and
other processes' reads of the same cache wait on the lock meanwhile. Prints the mean time of a put at each
fill level, in a fresh temporary folder (entries of 20 KB, about a small update's executable).

    python benchmarks/jax_cache_eviction.py [--levels 0 1000 2000 5000 10000 40000] [--puts 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

from jax._src import lru_cache
from jax._src.lru_cache import LRUCache

from rlbench.run.compile_cache import MAX_BYTES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[0, 1000, 2000, 5000, 10000, 40000])
    parser.add_argument("--puts", type=int, default=20, help="puts timed at each level")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; max_size {MAX_BYTES} bytes")
    with tempfile.TemporaryDirectory() as folder:
        cache, filled = LRUCache(folder, max_size=MAX_BYTES), 0
        value = b"x" * 20_000
        for level in sorted(args.levels):
            while filled < level:  # written as put writes them (entry, access time), without timing put's scan
                stamp = time.time_ns().to_bytes(8, "little")
                (cache.path / f"fill{filled}{lru_cache._CACHE_SUFFIX}").write_bytes(value)
                (cache.path / f"fill{filled}{lru_cache._ATIME_SUFFIX}").write_bytes(stamp)
                filled += 1
            start = time.perf_counter()
            for index in range(args.puts):
                cache.put(f"timed{level}_{index}", value)
            filled += args.puts
            per_put_ms = (time.perf_counter() - start) / args.puts * 1e3
            print(f"entries {level:6d}: {per_put_ms:8.2f} ms per put")


if __name__ == "__main__":
    main()
