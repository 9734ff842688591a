import gc, sys
sys.path.insert(0, "tests")
import numpy as np, torch, gltensor
from test_slot_views import images, write_all
ctx = gltensor.Context.headless(); ctx.make_current()
W, H = 97, 61
mode = sys.argv[1]
for k in range(4):
    slots = gltensor.SharedSlots(2, (W, H), backend="cuda")
    kept = None
    for step in range(4):
        write_all(slots, images(2, step, W, H))
        if mode == "tohost":
            from test_slots import to_host
            to_host(slots.read(copy=step % 2 == 1))
            continue
        t = torch.from_dlpack(slots.read(copy=False))
        if mode == "outlive":
            kept = t  # the last view outlives close(): the slots are freed when it dies
        del t
    slots.close()
    del kept
    gc.collect(); torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(mode, k, "device MiB used", (total - free) >> 20, flush=True)
ctx.close()
print("done", mode)
