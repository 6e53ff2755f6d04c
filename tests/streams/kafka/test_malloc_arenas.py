"""The worker's process keeps one C allocator arena, whatever threads allocate in it, and maps
only blocks of MMAP_THRESHOLD and more on their own."""

import ctypes
import ctypes.util
import subprocess
import sys

import pytest

from dpmstream.streams.kafka.malloc_arenas import MMAP_THRESHOLD

# A fresh process (arenas cannot be taken back): 4 threads each hold a block while the
# others allocate theirs, then glibc's malloc_info says how many arenas (<heap nr=...>).
ARENAS_AFTER_THREADS = """
import ctypes, ctypes.util, os, re, sys, tempfile, threading
from dpmstream.streams.kafka.malloc_arenas import compact_arenas
if sys.argv[1] == "compact":
    assert compact_arenas()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
libc.fdopen.restype = ctypes.c_void_p
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
barrier = threading.Barrier(4)
def hold():
    block = libc.malloc(1000)
    barrier.wait()
    libc.free(block)
threads = [threading.Thread(target=hold) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
with tempfile.TemporaryFile("w+") as fh:
    stream = libc.fdopen(os.dup(fh.fileno()), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    fh.seek(0)
    print(len(re.findall(r'<heap nr="', fh.read())))
"""


def glibc() -> bool:
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_info
    except (OSError, AttributeError, TypeError):
        return False
    return True


def arenas(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", ARENAS_AFTER_THREADS, mode],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not glibc(), reason="glibc's allocator only")
def test_threads_allocate_in_arenas_of_their_own_unless_the_process_is_compacted():
    assert arenas("default") > 1
    assert arenas("compact") == 1


# A fresh process: how many blocks glibc has mapped on its own (mallinfo2's hblks) while
# it holds one block of each size given, after compact_arenas().
MAPPED_WHILE_HOLDING = """
import ctypes, ctypes.util, sys
from dpmstream.streams.kafka.malloc_arenas import compact_arenas
assert compact_arenas()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
before = libc.mallinfo2().hblks
blocks = [libc.malloc(int(size)) for size in sys.argv[1:]]
print(libc.mallinfo2().hblks - before)
"""


def mapped_while_holding(*sizes: int) -> int:
    out = subprocess.run([sys.executable, "-c", MAPPED_WHILE_HOLDING, *map(str, sizes)],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not glibc(), reason="glibc's allocator only")
def test_blocks_of_a_fetch_come_from_the_arena_and_only_larger_ones_are_mapped_on_their_own():
    # librdkafka's fetch and lz4 buffers (hundreds of KiB): pages reused, not faulted in anew
    assert mapped_while_holding(200 << 10, 600 << 10, MMAP_THRESHOLD - 4096) == 0
    # past the threshold, fixed (glibc's would rise with each block freed): freed, unmapped
    assert mapped_while_holding(MMAP_THRESHOLD, 4 * MMAP_THRESHOLD) == 2
