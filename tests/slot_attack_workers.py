"""Spawned workers that attack the shared slots' memory with what the kernel lets a process do to a descriptor it
holds (tests/test_slots_resize.py, tests/test_slots_writers.py): resize it, punch holes in it, map it again, hand
the handle to a child or fork. An importable module, so that spawn and forkserver find the targets by name.

Every worker serves commands over a multiprocessing connection and replies ("ok", value) or
("error", exception class name, message), as the vector environments' workers do."""

import ctypes
import errno
import mmap
import os
import traceback

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def punch(fd, offset, length):
    """fallocate(PUNCH_HOLE): the pages are freed and read as zeros; only F_SEAL_WRITE (or FUTURE_WRITE) stops it."""
    if _libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def slot_descriptors(handle):
    """{descriptor: what it is} of every descriptor of the slots this process holds: the gltensor memfds by name,
    and on the CUDA backend the device memory's (not a memfd)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("/memfd:gltensor"):
            out[int(name)] = target.split(" ")[0].removeprefix("/memfd:")
    mem = handle.client._fds.memory_fd
    if mem is not None and mem >= 0:
        out[mem] = "cuda-memory"
    return out


def _errname(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def attack(handle, kind):
    """Does `kind` to every descriptor of the slots this process holds; {what: result} ("ok" or the errno's name).
    kind: truncate0, truncate4096, truncate8192 (shrink), grow (to 1 GiB), punch (the whole file), punch_record
    (page 0 of its own slot's memfd), punch_pixels (the rest of it: its images, CPU backend), remap (a writable shared
    mapping of the whole file, one byte written at its end), zero_control / poke_control (the control page's read
    count set to 0 / 12345 through a writable mapping)."""
    results = {}
    for fd, what in sorted(slot_descriptors(handle).items()):
        try:
            size = os.fstat(fd).st_size
            if kind.startswith("truncate"):
                os.ftruncate(fd, int(kind.removeprefix("truncate")))
            elif kind == "grow":
                os.ftruncate(fd, 1 << 30)
            elif kind == "punch":
                punch(fd, 0, max(size, 4096))
            elif kind == "punch_record":
                if not what.startswith("gltensor-slot-"):
                    continue
                punch(fd, 0, 4096)
            elif kind == "punch_pixels":
                if not what.startswith("gltensor-slot-") or size <= 4096:
                    continue
                punch(fd, 4096, size - 4096)
            elif kind == "remap":
                m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                m[size - 1] = m[size - 1]
                m.close()
            elif kind in ("zero_control", "poke_control"):
                if what != "gltensor-slots-control":
                    continue
                m = mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                m[8:16] = (0 if kind == "zero_control" else 12345).to_bytes(8, "little")
                m.close()
            else:
                raise ValueError(f"unknown attack {kind!r}")
            results[what] = "ok"
        except OSError as e:
            results[what] = _errname(e)
        except ValueError as e:  # mmap of a descriptor that cannot be mapped (the CUDA memory's)
            results[what] = f"ValueError: {e}"
        try:
            results[what] += f" ({os.fstat(fd).st_size} bytes)"
        except OSError:
            pass
    return results


def _context(handle):
    return handle.headless_context() if handle.client.backend == "cuda" else None


def serve(conn):
    """A long-lived worker: ("handle", h) takes a new SlotHandle (the previous one closed); ("write", value) writes
    the slot full of `value`; ("attack", kind) attack(); ("fds",) slot_descriptors(); None ends it."""
    handle = ctx = None
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg is None:
            break
        try:
            cmd, value = msg[0], None
            if cmd == "handle":
                if handle is not None:
                    handle.close()
                handle = msg[1]
                if ctx is None:
                    ctx = _context(handle)
            elif cmd == "write":
                width, height = handle.client.size
                handle.write_host(np.full((height, width, 4), msg[1], np.uint8))
            elif cmd == "attack":
                value = attack(handle, msg[1])
            elif cmd == "fds":
                value = slot_descriptors(handle)
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", value))
        except Exception as e:  # noqa: BLE001 - reported to the test
            conn.send(("error", type(e).__name__, f"{e}\n{traceback.format_exc()}"))
    if handle is not None:
        handle.close()
    if ctx is not None:
        ctx.close()


def try_every_path_to_another_slot(handle, other, conn):
    """Spawned with slot `handle.slot`'s handle: tries to write slot `other` through every path its objects offer.
    Replies {path: result} and the memfds it holds."""
    from gltensor import _gltensor
    from gltensor.slots import SlotHandle

    ctx = _context(handle)
    width, height = handle.client.size
    img = np.full((height, width, 4), 0xAB, np.uint8)
    c = handle.client
    paths = {
        "client.write_host": lambda: c.write_host(other, img),
        "client.write": lambda: c.write(other, img),
        "client.writer": lambda: c.writer(other).write_host(img),
        "SlotHandle(client, other)": lambda: SlotHandle(c, other).write_host(img),
        "_SlotWriter(own slot fd, other)": lambda: _gltensor._SlotWriter(
            c._fds.memory_fd, c._fds.control_fd, c._fds.geometry_fd, c._slot_fd(handle.slot), other).write_host(img),
    }
    results = {}
    try:
        handle.write_host(np.full((height, width, 4), 0x11, np.uint8))  # its own slot: works
        for name, path in paths.items():
            try:
                path()
                results[name] = "written"
            except Exception as e:  # noqa: BLE001 - reported to the test
                results[name] = f"{type(e).__name__}: {e}"
        conn.send(("ok", (results, sorted(slot_descriptors(handle).values()))))
    except Exception as e:  # noqa: BLE001
        conn.send(("error", type(e).__name__, f"{e}\n{traceback.format_exc()}"))
    finally:
        handle.close()
        if ctx is not None:
            ctx.close()


def hold_and_write(handle, value, conn):
    """Writes its slot full of `value`, replies, and keeps its writer attached until told (None) to stop:
    ("write", v) writes again, ("release",) closes the writer (the handle stays)."""
    ctx = _context(handle)
    width, height = handle.client.size
    while True:
        try:
            handle.write_host(np.full((height, width, 4), value, np.uint8))
            conn.send(("ok", os.getpid()))
        except Exception as e:  # noqa: BLE001
            conn.send(("error", type(e).__name__, str(e)))
        msg = conn.recv()
        if msg is None:
            break
        if msg[0] == "release":
            handle.client.writer(handle.slot).close()
            conn.send(("ok", None))
            msg = conn.recv()
            if msg is None:
                break
        value = msg[1]
    handle.close()
    if ctx is not None:
        ctx.close()


def fork_and_write(handle, conn):
    """CPU backend. Writes its slot (its writer attached), then forks a child that writes through the inherited
    handle: refused while this process's writer is attached; once it is closed, the child writes as itself.
    Replies (this pid, the child's pid, the child's first answer, its second)."""
    width, height = handle.client.size
    handle.write_host(np.full((height, width, 4), 0x11, np.uint8))
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the inherited handle, its writer the parent's
        code = 1
        try:
            os.close(to_child_w), os.close(from_child_r)
            answers = []
            for value in (0x22, 0x33):
                try:
                    handle.write_host(np.full((height, width, 4), value, np.uint8))
                    answers.append("written")
                except Exception as e:  # noqa: BLE001
                    answers.append(f"{type(e).__name__}: {e}")
                os.write(from_child_w, (answers[-1] + "\n").encode())
                if value == 0x22:
                    os.read(to_child_r, 1)  # the parent closed its writer
            code = 0
        finally:
            os._exit(code)
    os.close(to_child_r), os.close(from_child_w)
    reader = os.fdopen(from_child_r)
    first = reader.readline().strip()
    handle.client.writer(handle.slot).close()  # this process lets go of the slot
    os.write(to_child_w, b"g")
    second = reader.readline().strip()
    _, status = os.waitpid(pid, 0)
    conn.send(("ok", (os.getpid(), pid, first, second, os.waitstatus_to_exitcode(status))))
    handle.close()


def race_writer(handle, values, pause, stop, ready, report):
    """The two-writer race: rewrites the slot alternately full of values[0] and values[1] while another process
    holding the same slot's handle does the same with its values. Refused while the other holds the slot
    (SlotsBusyError); lets go of the slot (closes its writer) after a random 1-20 writes, so that the two take
    turns all through the race. Reports (writes, refusals) on `report` when `stop` is set."""
    import random
    import time

    import gltensor

    ctx = _context(handle)
    width, height = handle.client.size
    images = [np.full((height, width, 4), v, np.uint8) for v in values]
    rng = random.Random(os.getpid())
    writes = refused = 0
    ready.set()
    k, turn = 0, rng.randint(1, 20)
    try:
        while not stop.is_set():
            try:
                handle.write_host(images[k])
            except gltensor.SlotsBusyError:
                refused += 1
                time.sleep(0.0005)
                continue
            writes += 1
            k ^= 1
            turn -= 1
            if turn == 0:
                handle.client.writer(handle.slot).close()  # let the other one in
                turn = rng.randint(1, 20)
            time.sleep(pause * (k + 1))
    except gltensor.ClosedError:
        pass
    finally:
        report.put((os.getpid(), writes, refused))
        handle.close()
        if ctx is not None:
            ctx.close()
