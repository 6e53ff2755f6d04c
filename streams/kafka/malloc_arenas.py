"""The C allocator's arenas in a worker's process (glibc only; elsewhere nothing changes).

glibc's malloc gives each thread that allocates an arena of its own, up to eight per core.
A worker's librdkafka threads (broker I/O, fetch buffers, the queue of fetched records)
and its fetch thread filled arenas of their own that grew to 20-25 MiB and kept their
freed pages: bench/bench_worker.py's child peaked at 116-122 MiB. One arena for the
whole process, and blocks of 128 KiB and more always mapped on their own (glibc's
threshold otherwise rises with each large block freed, after which such blocks come from
the arena and their pages stay when freed), took the peak to 104-106 MiB (issue 30). The
threads hardly contend for the one arena: Python's small objects come from its own
pools, and the worker's threads spend their time waiting on the broker.

Why 1 MiB and not glibc's 128 KiB start: each block mapped on its own is a fresh mapping
whose pages fault in one by one (zeroed, charged to the cgroup) and are unmapped when it
is freed. librdkafka's lz4 output buffers and fetch buffers (up to the 512 KiB fetch,
and ~4x that decompressed) and the producers' request buffers fall between the two: with
128 KiB a worker took ~35,000 page faults per 465,000 lines more than it does now, 8-11 %
of its CPU (perf cpu-clock samples in page faults and munmap), at 1.81-2.04 us a line
(issue 30, session 25). From the arena, the same blocks reuse pages already there.

Set with mallopt() from inside the process at the worker's start (Worker.run, before the
consumer's threads exist), not through MALLOC_ARENA_MAX in the environment, which every
program the user starts from that shell would inherit.

    compact_arenas()   # True where applied (glibc)
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3    # glibc's mallopt parameters (malloc.h)
M_ARENA_MAX = -8
ARENAS = 1
MMAP_THRESHOLD = 1 << 20   # fixed: larger blocks mapped on their own (see above)


def compact_arenas() -> bool:
    """One malloc arena for the process and blocks of MMAP_THRESHOLD and more mapped on
    their own; False (nothing done) where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):   # no C library found, or not glibc's
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_ARENA_MAX, ARENAS)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
