"""Which use of CUDA shared slots does compute-sanitizer's leak check report at exit? One case per run:
   compute-sanitizer --tool memcheck --leak-check full python3 tools/slots_leak_probe.py CASE
CASE: host-views (the trainer writes, views read through torch), worker-views (a spawned worker writes, as the race
test), worker-copies, host-copies. Prints the count of closed slots still allocated after close."""
import gc
import multiprocessing as mp
import sys
import time

import numpy as np

import gltensor

SIDE = 2048


def writer(handle, stop, ready):
    ctx = handle.headless_context()
    images = [np.zeros((SIDE, SIDE, 4), np.uint8), np.full((SIDE, SIDE, 4), 255, np.uint8)]
    handle.write_host(images[0])
    ready.set()
    k = 0
    try:
        while not stop.is_set():
            k ^= 1
            handle.write_host(images[k])
            time.sleep(0.0005 * (k + 1))
    except gltensor.ClosedError:
        pass
    finally:
        handle.close()
        ctx.close()


def main(case):
    import torch

    slots = gltensor.SharedSlots(1, (SIDE, SIDE), backend="cuda")
    procs, stop = [], None
    if case.startswith("worker"):
        c = mp.get_context("spawn")
        stop, ready = c.Event(), c.Event()
        p = c.Process(target=writer, args=(slots.handle(0), stop, ready), daemon=True)
        p.start()
        procs.append(p)
        assert ready.wait(120)
    reads = refused = 0
    end = time.monotonic() + 5
    previous = None
    while time.monotonic() < end:
        if not procs:
            slots.write_host(0, np.full((SIDE, SIDE, 4), reads & 255, np.uint8))
        try:
            frame = slots.read(copy=not case.endswith("views"))
        except gltensor.StaleSlotError:
            refused += 1
            continue
        reads += 1
        host = torch.from_dlpack(frame).cpu().numpy()
        previous = (frame, host)
    del previous, frame
    if stop is not None:
        stop.set()
        for p in procs:
            p.join(30)
    slots.close()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    print(f"{case}: {reads} reads, {refused} refused; closed slots still allocated: "
          f"{gltensor._gltensor._closed_slots_alive_for_testing()}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
