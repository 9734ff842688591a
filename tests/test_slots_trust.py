"""Nothing a worker writes can crash the trainer, make it read out of bounds, or change another slot's image
(issue 34). A worker maps writable only its own slot record and (CPU backend) its own slot of each set; the
header with the geometry it maps read-only, and the trainer never reads the geometry from shared memory at all.

The fuzz writes random bytes over every byte a worker can write (its record page, its pixels) between steps and
checks: the trainer's read returns (the other slots' images exact, whole) or raises a clear error naming the
attacked slot; never a crash. GLTENSOR_FUZZ_MUTATIONS (default 3000) sets how many mutations each backend gets
(100000 on the GPU machine: tools/gpu_verify.sh trust). Run under ASan/UBSan by tools/ci_sanitize.sh and under
compute-sanitizer by gpu_verify.sh memcheck-trust.

The sealed header's layout is mirrored here (HEADER_FIELDS) and checked against the slots' own geometry before use;
test_slots_sealed.py shows that no descriptor a worker holds can change it."""
import gc
import mmap
import multiprocessing as mp
import os
import re
import signal
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gltensor
from gltensor import _gltensor
from frames import to_host  # noqa: E402

MUTATIONS = int(os.environ.get("GLTENSOR_FUZZ_MUTATIONS", "3000"))
W, H = 37, 23
ATTACKER = 1
PAGE = max(mmap.PAGESIZE, 4096)
RECORD_BYTES = 56  # seq, written, pid + writing, start time, writes, owner (slots_shared.h glt_slot_record)

# glt_slots_header (the sealed geometry memfd): magic u64, version u32, pad u32, then glt_slots_geometry at byte 16.
HEADER_FIELDS = {
    "backend": (16, "<I"), "count": (20, "<I"), "buffers": (24, "<I"), "width": (28, "<i"), "height": (32, "<i"),
    "gl_internal_format": (36, "<I"), "page": (40, "<Q"), "row_pitch": (48, "<Q"), "slot_bytes": (56, "<Q"),
    "memory_bytes": (64, "<Q"), "control_bytes": (72, "<Q"), "slot_file_bytes": (80, "<Q"),
    "pixel_offset": (88, "<Q"), "control_seals": (96, "<I"),
}


def read_geometry(geometry_fd):
    header = os.pread(geometry_fd, 4096, 0)
    return {k: struct.unpack_from(f, header, off)[0] for k, (off, f) in HEADER_FIELDS.items()}


class Rig:
    """Slots with `count` slots; slot ATTACKER's writable memory mapped as its worker maps it (its record page and,
    on the CPU backend, its image of each set), through the slot's own descriptor, as its worker gets it."""

    def __init__(self, backend, count=3):
        self.backend, self.count = backend, count
        self.slots = gltensor.SharedSlots(count, (W, H), backend=backend)
        mem, self.ctl, self.geo = self.slots._core._export()
        self.mem = mem
        self.slot_fds = [self.slots._core._export_slot(i) for i in range(count)]
        self.geometry = read_geometry(self.geo)
        g = self.geometry
        # The mirror of the layout must be the library's: checked against what the slots say of themselves.
        assert (g["count"], g["buffers"], g["width"], g["height"]) == (count, self.slots.buffers, W, H), g
        assert (g["row_pitch"], g["slot_bytes"]) == (self.slots.row_pitch, self.slots.slot_bytes), g
        assert g["control_bytes"] == PAGE and g["pixel_offset"] == (PAGE if backend == "cpu" else 0), g
        self.regions = []
        if count > ATTACKER:
            self.regions.append(mmap.mmap(self.slot_fds[ATTACKER], PAGE, offset=0))
        if backend == "cpu" and count > ATTACKER:
            for s in range(g["buffers"]):
                off = g["pixel_offset"] + s * g["slot_bytes"]
                self.regions.append(mmap.mmap(self.slot_fds[ATTACKER], g["slot_bytes"], offset=off))
        self.rng = np.random.default_rng(34)
        self.mutations = self.reads = self.refused = 0

    def images(self):
        return [self.rng.integers(0, 256, (H, W, 4), dtype=np.uint8) for _ in range(self.count)]

    def write(self, imgs, skip=()):
        for i, img in enumerate(imgs):
            if i not in skip:
                self.slots.write_host(i, img)

    def check_read(self, imgs, copy=True):
        """Reads; a frame must show every slot but the attacker's exactly, a refusal must name only the attacker."""
        try:
            frame = self.slots.read(copy=copy)
        except gltensor.GLTensorError as e:
            msg = str(e)
            named = {int(k) for k in re.findall(r"slot (\d+)", msg)}
            assert named == {ATTACKER}, msg
            self.refused += 1
            return False
        got = to_host(frame)
        for i in range(self.count):
            if i != ATTACKER:
                np.testing.assert_array_equal(got[i], imgs[i], err_msg=f"slot {i} changed by slot {ATTACKER}'s worker")
        del got, frame
        self.reads += 1
        return True

    def close(self):
        for r in self.regions:
            r.close()
        os.close(self.ctl)
        os.close(self.geo)
        for fd in self.slot_fds:
            os.close(fd)
        if self.mem >= 0:
            os.close(self.mem)
        gc.collect()
        self.slots.close()


@pytest.fixture
def rig(backend, gl):
    made = []

    def make(**kwargs):
        r = Rig(backend, **kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


SPECIAL = [0, 1, 2**31, 2**32 - 1, 2**40, 2**63, 2**64 - 1]
mutation = st.one_of(
    # One 8-byte value at an 8-byte offset of the record (the probe): the fields themselves.
    st.tuples(st.just(0), st.integers(0, RECORD_BYTES // 8 - 1).map(lambda k: 8 * k),
              st.sampled_from(SPECIAL).map(lambda v: struct.pack("<Q", v))),
    # Random bytes anywhere in the attacker's writable memory (region picked modulo the ones mapped).
    st.tuples(st.integers(0, 3), st.integers(0, 1 << 22), st.binary(min_size=1, max_size=64)),
)


def test_fuzz_what_a_worker_can_write(rig):
    r = rig()
    examples = max(1, MUTATIONS // 4)

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(mutation, min_size=1, max_size=7), st.booleans(), st.booleans(), st.booleans())
    def step(mutations, attacker_writes, after_write, view):
        imgs = r.images()
        r.write(imgs, skip=() if attacker_writes else (ATTACKER,))
        for region, offset, data in mutations:
            m = r.regions[region % len(r.regions)]
            offset %= max(1, len(m) - len(data) + 1)
            m[offset:offset + len(data)] = data[: len(m) - offset]
            r.mutations += 1
        if after_write:
            # The attacker's own next write after the damage: must work (or fail clearly), never crash.
            r.slots.write_host(ATTACKER, imgs[ATTACKER])
        r.check_read(imgs, copy=not view)

    step()
    # Afterwards every slot works again: a clean step returns every image exactly.
    imgs = r.images()
    r.write(imgs)
    frame = to_host(r.slots.read())
    np.testing.assert_array_equal(frame, np.stack(imgs))
    print(f"{r.backend}: {r.mutations} mutations, {r.reads} reads returned, {r.refused} refused")
    assert r.mutations >= examples


# The table: one field of the shared header overwritten (each crashed or fooled the trainer before, when the
# header was the control memory's first page).
TABLE = [("buffers", 0), ("slot_bytes", 2**40), ("row_pitch", 2**30), ("pixel_offset", 2**40), ("height", 100000),
         ("count", 4000), ("width", -5)]


@pytest.mark.parametrize("field,value", TABLE, ids=[f"{f}={v}" for f, v in TABLE])
def test_an_overwritten_header_is_harmless(rig, field, value):
    r = rig(count=2)
    imgs = r.images()
    r.write(imgs)
    assert r.check_read(imgs)
    # The header is sealed: no descriptor of it can be written or mapped writable (test_slots_sealed.py).
    with pytest.raises(PermissionError):
        os.pwrite(r.geo, struct.pack(HEADER_FIELDS[field][1], value), HEADER_FIELDS[field][0])
    off, fmt = HEADER_FIELDS[field]
    # The control page, where the header used to be, is sealed against every process's writes but the trainer's
    # (Linux 5.1+); on an older kernel a process that maps it itself can write it, and the trainer restores it.
    if r.geometry["control_seals"] & 0x10:
        with pytest.raises(PermissionError):
            mmap.mmap(r.ctl, PAGE)
    # A worker can write its own slot's memory where it likes: the field's bytes into its record page.
    struct.pack_into(fmt, r.regions[0], off, value)
    # The trainer never reads a geometry from shared memory: its reads return the exact images (the attacker's
    # slot written again by its own writer, which puts its record back in order).
    for _ in range(3):
        imgs = r.images()
        r.write(imgs)
        frame = to_host(r.slots.read())
        np.testing.assert_array_equal(frame, np.stack(imgs))
        del frame
    # A worker that attaches now reads the sealed geometry, unchanged, and its writes land where they should.
    assert read_geometry(r.geo) == r.geometry
    r.slots._client.writer(0).close()  # one writer per slot: the trainer's own lets go of slot 0 first
    w = _gltensor._SlotWriter(r.mem, r.ctl, r.geo, r.slot_fds[0], 0)
    assert (w.count, w.size) == (2, (W, H))
    w.close()
    imgs = r.images()
    r.write(imgs)
    np.testing.assert_array_equal(to_host(r.slots.read()), np.stack(imgs))


def _probe_mappings(handle, backend, conn):
    """Spawned worker: attaches, lists its mappings of the slots' memfd, then writes into its header mapping."""
    try:
        ctx = handle.headless_context() if backend == "cuda" else None  # noqa: F841 - current while writing
        handle.write_host(np.zeros((H, W, 4), np.uint8))
        maps = []
        with open("/proc/self/maps") as f:
            for line in f:
                if "memfd:gltensor" in line:
                    addr, perms, offset = line.split()[:3]
                    lo, hi = (int(x, 16) for x in addr.split("-"))
                    name = line.split("memfd:", 1)[1].split()[0]
                    maps.append((perms, int(offset, 16), hi - lo, lo, name))
        conn.send(("maps", maps))
        header = [m for m in maps if m[4] == "gltensor-slots-control"]
        import ctypes

        # The header mapping cannot be made writable either (it maps a read-only descriptor of the memfd).
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        rc = libc.mprotect(header[0][3], header[0][2], mmap.PROT_READ | mmap.PROT_WRITE)
        conn.send(("mprotect", (rc, ctypes.get_errno())))

        conn.send(("writing", None))
        ctypes.memset(header[0][3] + 20, 0xFF, 4)  # the header's slot count, through the worker's own mapping
        conn.send(("wrote", None))
    except Exception as e:  # noqa: BLE001 - reported to the test
        conn.send(("error", f"{type(e).__name__}: {e}"))


@pytest.mark.skipif(bool(os.environ.get("GLTENSOR_UNDER_SANITIZER")),
                    reason="the worker's deliberate SIGSEGV would be a sanitizer report")
def test_a_worker_maps_only_its_own_memory(rig, backend):
    r = rig(count=3)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_probe_mappings, args=(r.slots.handle(ATTACKER), backend, child), daemon=True)
    p.start()
    child.close()
    assert parent.poll(120)
    kind, maps = parent.recv()
    assert kind == "maps", maps
    g = r.geometry
    writable = sorted((name, off, size) for perms, off, size, _, name in maps if "w" in perms)
    readonly = sorted((name, off, size) for perms, off, size, _, name in maps if "w" not in perms)
    # Its own slot's memory only (its record, and on the CPU backend its image of each set), and the control page.
    own = [(f"gltensor-slot-{ATTACKER}", 0, PAGE)]
    if backend == "cpu":
        own += [(f"gltensor-slot-{ATTACKER}", g["pixel_offset"] + s * g["slot_bytes"], g["slot_bytes"])
                for s in range(g["buffers"])]
    assert writable == sorted(own), maps
    assert readonly == [("gltensor-slots-control", 0, PAGE)], maps
    import errno

    assert parent.recv() == ("mprotect", (-1, errno.EACCES))
    # A wild write into the header kills the worker (SIGSEGV), not the trainer, and changes nothing it reads.
    assert parent.recv()[0] == "writing"
    p.join(60)
    assert p.exitcode == -signal.SIGSEGV, p.exitcode
    try:
        after = parent.recv() if parent.poll(1) else None
    except EOFError:  # the worker died before it could say anything more
        after = None
    assert after is None, after
    assert read_geometry(r.geo) == r.geometry
    imgs = r.images()
    r.write(imgs)
    frame = to_host(r.slots.read())
    np.testing.assert_array_equal(frame, np.stack(imgs))


def test_every_exported_descriptor_is_close_on_exec(make_slots):
    # A program the trainer starts must not inherit the slots (on CUDA: keep the GPU allocation alive).
    slots = make_slots(2)
    mem, ctl, geo = slots._core._export()
    own = slots._core._export_slot(1)
    try:
        assert not os.get_inheritable(ctl)
        assert not os.get_inheritable(geo)
        assert not os.get_inheritable(own)
        if mem >= 0:
            assert not os.get_inheritable(mem)
    finally:
        os.close(ctl)
        os.close(geo)
        os.close(own)
        if mem >= 0:
            os.close(mem)


def test_a_forked_child_drops_the_slots_before_an_inherited_view(backend, gl):
    # The child's copy of the slots is freed by the last of its references: the SharedSlots the child drops, then
    # the view it inherited (its death wrote into the freed object before: valgrind/ASan use after free).
    from conftest import fork_or_skip

    fork_or_skip("fork")
    s = gltensor.SharedSlots(3, (W, H), backend=backend)
    try:
        imgs = [np.full((H, W, 4), i + 1, np.uint8) for i in range(3)]
        for i, img in enumerate(imgs):
            s.write_host(i, img)
        view = s.read(copy=False)
        pid = os.fork()
        if pid == 0:  # the child: no GL, no CUDA; drops what it inherited, in the order of the bug
            code = 1
            try:
                del s
                gc.collect()
                del view
                gc.collect()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        np.testing.assert_array_equal(to_host(view), np.stack(imgs))  # the trainer's view is untouched
        del view
    finally:
        gc.collect()
        s.close()


def _write_once_and_exit(handle, backend):
    ctx = handle.headless_context() if backend == "cuda" else None  # noqa: F841 - current while writing
    handle.write_host(np.full((H, W, 4), 7, np.uint8))


def test_a_zombie_writer_counts_as_gone(make_slots, backend):
    from multiprocessing.connection import wait

    s = make_slots(1)
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_write_once_and_exit, args=(s.handle(0), backend), daemon=True)
    p.start()
    wait([p.sentinel], 120)  # exited; not reaped (is_alive()/join() would reap it): a zombie now
    try:
        import time

        state, end = None, time.monotonic() + 30
        while state != "Z" and time.monotonic() < end:  # the sentinel closes a little before the exit completes
            with open(f"/proc/{p.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            time.sleep(0.01)
        assert state == "Z"
        np.testing.assert_array_equal(to_host(s.read()), np.full((1, H, W, 4), 7, np.uint8))
        assert s.state(0) == ("writer_gone", p.pid)
        with pytest.raises(gltensor.StaleSlotError, match=rf"slot 0: its writer \(pid {p.pid}\) has exited"):
            s.read()
    finally:
        p.join(10)
