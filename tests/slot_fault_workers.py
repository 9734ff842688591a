"""Processes for tests/test_slots_faults.py (an importable module: spawn and forkserver find the targets by name).

Every worker serves commands over a multiprocessing connection and replies ("ok", value) or
("error", exception class name, message), as the vector environments' workers do."""

import os
import traceback

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402


def pattern(slot, step, width, height):
    """The (height, width, 4) uint8 image slot `slot` shows at `step`, top row first."""
    return np.random.default_rng([slot, step, width]).integers(0, 256, (height, width, 4), dtype=np.uint8)


def memfd_counts(pid="self"):
    """(descriptors on a gltensor memfd, mappings of one, all descriptors) of process `pid`."""
    fds = maps = total = 0
    base = f"/proc/{pid}"
    for name in os.listdir(f"{base}/fd"):
        total += 1
        try:
            if "memfd:gltensor" in os.readlink(f"{base}/fd/{name}"):
                fds += 1
        except OSError:  # closed meanwhile (listdir's own descriptor)
            pass
    with open(f"{base}/maps") as f:
        maps = sum(1 for line in f if "memfd:gltensor" in line)
    return fds, maps, total


def _context_for(handle):
    """A current GL context on the slots' GPU (the CUDA backend's host writes need one; CPU slots do not)."""
    if handle.client.backend == "cuda":
        return handle.headless_context()
    return None


def serve(handle, conn):
    """One slot's worker. Commands: ("write", step) writes pattern(slot, step); ("write_loop",) writes until
    killed (a big slot: most of the time is spent inside the write); ("counts",) memfd_counts(); ("close",)
    closes the handle; ("spawn_child",) passes the handle on to a process of its own (a grandchild of the
    trainer) and returns what it answers; None ends the worker."""
    try:
        ctx = _context_for(handle)
        width, height = handle.client.size
        conn.send(("ok", os.getpid()))
    except Exception as e:  # noqa: BLE001  (reported to the test)
        conn.send(("error", type(e).__name__, f"{e}\n{traceback.format_exc()}"))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg is None:
            break
        try:
            cmd = msg[0]
            value = None
            if cmd == "write":
                handle.write_host(pattern(handle.slot, msg[1], width, height))
            elif cmd == "write_loop":
                conn.send(("ok", "looping"))
                images = [pattern(handle.slot, k, width, height) for k in range(2)]
                k = 0
                while True:
                    handle.write_host(images[k & 1])
                    k += 1
            elif cmd == "counts":
                value = memfd_counts()
            elif cmd == "close":
                handle.close()
                value = memfd_counts()
            elif cmd == "spawn_child":
                value = _through_a_grandchild(handle, msg[1])
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", value))
        except Exception as e:  # noqa: BLE001
            conn.send(("error", type(e).__name__, str(e)))
    if ctx is not None:
        ctx.close()


def _write_once(handle, step, conn):
    try:
        ctx = _context_for(handle)
        width, height = handle.client.size
        handle.write_host(pattern(handle.slot, step, width, height))
        handle.close()
        if ctx is not None:
            ctx.close()
        conn.send(("ok", os.getpid()))
    except Exception as e:  # noqa: BLE001
        conn.send(("error", type(e).__name__, str(e)))


def _through_a_grandchild(handle, step):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_write_once, args=(handle, step, child), daemon=True)
    p.start()
    child.close()
    if not parent.poll(120):
        p.kill()
        raise TimeoutError("the grandchild did not answer in 120 s")
    answer = parent.recv()
    p.join(30)
    if answer[0] != "ok":
        raise RuntimeError(f"grandchild: {answer[1]}: {answer[2]}")
    return answer[1]


def trainer(count, size, backend, conns, report):
    """A trainer process of its own (the test kills it): makes the slots, starts one worker per slot with
    `conns[k]` (the test's line to worker k), reports (its pid, the workers' pids), then waits."""
    import multiprocessing as mp

    import gltensor

    slots = gltensor.SharedSlots(count, size, backend=backend)
    ctx = mp.get_context("spawn")
    procs = []
    for k in range(count):
        p = ctx.Process(target=serve, args=(slots.handle(k), conns[k]), daemon=True)
        p.start()
        procs.append(p)
    report.send((os.getpid(), [p.pid for p in procs]))
    report.recv()  # never answered: the test SIGKILLs this process


def cycler(conn):
    """A long-lived worker for the create/close cycles: each message is a fresh SlotHandle (None ends); it
    writes pattern(slot, cycle), closes the handle and answers memfd_counts() while attached and after."""
    ctx = None
    cycle = 0
    while True:
        handle = conn.recv()
        if handle is None:
            break
        try:
            if ctx is None:
                ctx = _context_for(handle)
            width, height = handle.client.size
            handle.write_host(pattern(handle.slot, cycle, width, height))
            attached = memfd_counts()
            handle.close()
            conn.send(("ok", (attached, memfd_counts())))
        except Exception as e:  # noqa: BLE001
            conn.send(("error", type(e).__name__, str(e)))
        cycle += 1
    if ctx is not None:
        ctx.close()
