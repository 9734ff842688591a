"""The slots' memfds are sealed. The geometry: the trainer writes it once into a memfd of its own and seals it
(F_SEAL_WRITE, SHRINK, GROW, SEAL) before any descriptor leaves; workers refuse a geometry descriptor without
those seals. So no worker, whatever descriptor it holds and however it uses it, can change what the other workers
attach by. The control page is sealed against resizing and (Linux 5.1+) against every write but the trainer's own;
each slot's memfd against resizing: tests/test_slots_resize.py attacks those with spawned workers."""
import errno
import fcntl
import mmap
import multiprocessing as mp
import os

import numpy as np
import pytest

import gltensor
from gltensor import _gltensor

W, H = 37, 23
SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def to_host(frame):
    try:
        return np.from_dlpack(frame)
    except (BufferError, RuntimeError, TypeError):
        import torch

        return torch.from_dlpack(frame).cpu().numpy()


@pytest.fixture
def exported(backend, gl):
    s = gltensor.SharedSlots(3, (W, H), backend=backend)
    mem, ctl, geo = s._core._export()
    own = s._core._export_slot(0)
    s.own = own  # slot 0's memory, for the writers the tests attach themselves
    yield s, mem, ctl, geo
    for fd in (mem, ctl, geo, own):
        if fd >= 0:
            os.close(fd)
    s.close()


def test_the_geometry_descriptor_is_sealed(exported):
    _, _, _, geo = exported
    assert fcntl.fcntl(geo, fcntl.F_GET_SEALS) & SEALS == SEALS
    assert os.readlink(f"/proc/self/fd/{geo}").startswith("/memfd:gltensor-slots-geometry")


def _unsealed_copy(geo, change=None):
    """A memfd holding the header's bytes (one 4-byte field changed: (offset, value)), not sealed."""
    data = bytearray(os.pread(geo, 4096, 0))
    if change:
        data[change[0]:change[0] + 4] = change[1].to_bytes(4, "little")
    fd = os.memfd_create("forged-geometry", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, bytes(data))
    return fd


@pytest.mark.parametrize("seals", [0, fcntl.F_SEAL_WRITE, SEALS & ~fcntl.F_SEAL_SEAL], ids=["none", "write", "no-seal-seal"])
def test_a_worker_refuses_an_unsealed_geometry(exported, seals):
    # The trainer's very bytes, but in a memfd whose holder could still change them: refused, naming it.
    slots, mem, ctl, geo = exported
    fake = _unsealed_copy(geo)
    try:
        if seals:
            fcntl.fcntl(fake, fcntl.F_ADD_SEALS, seals)
        with pytest.raises(gltensor.InvalidArgumentError, match=rf"geometry descriptor {fake} is not sealed"):
            _gltensor._SlotWriter(mem, ctl, fake, slots.own, 0)
    finally:
        os.close(fake)


@pytest.mark.parametrize("seals", [0, fcntl.F_SEAL_SHRINK, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW],
                         ids=["none", "shrink", "no-seal-seal"])
@pytest.mark.parametrize("which", ["control", "slot"])
def test_a_worker_refuses_memory_that_could_be_resized(exported, which, seals):
    # A memfd of the right size, but one its holder could still shrink under the worker's mapping (SIGBUS): refused
    # before anything is mapped, naming it and the seals it lacks. (One that is not a slot's memfd at all, or another
    # slot's, is refused before that: tests/test_slots_writers.py.)
    slots, mem, ctl, geo = exported
    real = ctl if which == "control" else slots.own
    fake = os.memfd_create("gltensor-slot-0", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)  # a forger picks the name too
    try:
        os.ftruncate(fake, os.fstat(real).st_size)
        if seals:
            fcntl.fcntl(fake, fcntl.F_ADD_SEALS, seals)
        args = (mem, fake, geo, slots.own, 0) if which == "control" else (mem, ctl, geo, fake, 0)
        what = "control page" if which == "control" else "slot 0's memory"
        with pytest.raises(gltensor.InvalidArgumentError,
                           match=rf"{what} \(descriptor {fake}\) is not sealed against resizing \(missing F_SEAL"):
            _gltensor._SlotWriter(*args)
    finally:
        os.close(fake)


def test_every_memfd_the_trainer_hands_out_is_sealed_against_resizing(exported):
    slots, mem, ctl, geo = exported
    size = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    for fd in (ctl, geo, slots.own):
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & size == size, os.readlink(f"/proc/self/fd/{fd}")
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 1 << 30)


def test_a_sealed_forgery_that_does_not_fit_is_refused(exported):
    # A memfd another process sealed itself (slot count 4000): its geometry does not fit the control memory.
    slots, mem, ctl, geo = exported
    fake = _unsealed_copy(geo, (20, 4000))
    try:
        fcntl.fcntl(fake, fcntl.F_ADD_SEALS, SEALS)
        with pytest.raises(gltensor.InvalidArgumentError, match="is not one a trainer of this gltensor makes|its geometry says"):
            _gltensor._SlotWriter(mem, ctl, fake, slots.own, 0)
    finally:
        os.close(fake)


def _attack_every_memfd(handle, backend, conn):
    """Spawned worker: attaches and writes, then tries every way to write a forged header (slot count 1, width 5)
    into every memfd of the slots it holds (the other descriptors are listed, not written: stdio, pipes, the
    trainer's pidfd, a GL driver's own): pwrite, a writable shared mapping, a reopen through /proc, growing it, changing its
    seals. Reports what each attempt did. Page 0 of the control memfd (the trainer's read count and closed flag)
    is put back as it was after each attempt that changed it, so that this test's later steps still run."""
    try:
        ctx = handle.headless_context() if backend == "cuda" else None  # noqa: F841 - current while writing
        handle.write_host(np.zeros((H, W, 4), np.uint8))
        forged = bytearray(256)
        forged[0:8] = (0x73746F6C73746C67).to_bytes(8, "little")
        forged[20:24] = (1).to_bytes(4, "little")
        forged[28:32] = (5).to_bytes(4, "little")
        forged = bytes(forged)
        report = {}
        for name in sorted(os.listdir("/proc/self/fd"), key=int):
            fd = int(name)
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if not target.startswith("/memfd:gltensor"):
                # Pipes, sockets, the trainer's pidfd, stdio; a GL driver's own memfds: none holds the slots.
                report[fd] = (target, None)
                continue
            original = os.pread(fd, len(forged), 0)
            results = {}

            def attempt(what, action, fd=fd, original=original, results=results):
                try:
                    action()
                    results[what] = "ok"
                except OSError as e:
                    results[what] = errno.errorcode.get(e.errno, str(e.errno))
                if os.pread(fd, len(forged), 0) != original:
                    results[what] += " (changed)"
                    os.pwrite(fd, original, 0)

            attempt("pwrite", lambda: os.pwrite(fd, forged, 0))

            def shared_map(fd=fd):
                m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                m[:len(forged)] = forged
                m.close()

            attempt("mmap", shared_map)

            def reopen(fd=fd):
                rw = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
                try:
                    os.pwrite(rw, forged, 0)
                finally:
                    os.close(rw)

            attempt("reopen", reopen)
            def grow(fd=fd):
                size = os.fstat(fd).st_size
                os.ftruncate(fd, size + 4096)
                os.ftruncate(fd, size)  # the control memory back to its size (the geometry is checked against it)

            attempt("grow", grow)
            attempt("seal", lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0))
            report[fd] = (target, results)
        conn.send(("ok", report))
    except Exception as e:  # noqa: BLE001 - reported to the test
        conn.send(("error", f"{type(e).__name__}: {e}"))


def test_no_descriptor_a_worker_holds_can_change_the_geometry(exported, backend):
    slots, mem, ctl, geo = exported
    before = os.pread(geo, 4096, 0)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_attack_every_memfd, args=(slots.handle(1), backend, child), daemon=True)
    p.start()
    child.close()
    assert parent.poll(120)
    kind, report = parent.recv()
    p.join(30)
    assert kind == "ok", report
    print(report)  # -s: what each attempt did on each descriptor
    memfds = {target: results for fd, (target, results) in report.items() if results is not None}
    geometry = [results for target, results in memfds.items() if "gltensor-slots-geometry" in target]
    assert len(geometry) == 1, report
    # Every way into the sealed memfd is refused, and nothing of it changed.
    assert geometry[0] == {"pwrite": "EPERM", "mmap": "EPERM", "reopen": "EPERM", "grow": "EPERM",
                           "seal": "EPERM"}, report
    assert os.pread(geo, 4096, 0) == before
    # The worker holds three memfds of the slots: the geometry, the control page and its own slot's memory.
    assert sorted(t.split(" ")[0] for t in memfds) == ["/memfd:gltensor-slot-1", "/memfd:gltensor-slots-control",
                                                       "/memfd:gltensor-slots-geometry"], report
    control = [results for target, results in memfds.items() if "gltensor-slots-control" in target][0]
    own = [results for target, results in memfds.items() if "gltensor-slot-1" in target][0]
    # No process can resize any of them or change their seals.
    assert control["grow"] == own["grow"] == control["seal"] == own["seal"] == "EPERM", report
    if fcntl.fcntl(ctl, fcntl.F_GET_SEALS) & 0x10:  # F_SEAL_FUTURE_WRITE (Linux 5.1+): the trainer's alone to write
        assert control == {"pwrite": "EPERM", "mmap": "EPERM", "reopen": "EPERM", "grow": "EPERM",
                           "seal": "EPERM"}, report
    # Its own slot's memory took the writes (the attacks are real ones), which are not the geometry: a worker
    # attaching now gets the trainer's geometry, and every slot's image arrives exactly.
    assert own["pwrite"] == own["mmap"] == "ok (changed)", report
    w = _gltensor._SlotWriter(mem, ctl, geo, slots.own, 0)
    assert (w.count, w.size) == (3, (W, H))
    w.close()
    imgs = [np.full((H, W, 4), 10 * (i + 1), np.uint8) for i in range(3)]
    for i, img in enumerate(imgs):
        slots.write_host(i, img)
    np.testing.assert_array_equal(to_host(slots.read()), np.stack(imgs))
