"""The worker's process keeps one C allocator arena, whatever threads allocate in it."""

import ctypes
import ctypes.util
import subprocess
import sys

import pytest

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
