"""Shared slots: many engine processes, one GPU batch, no CUDA in the workers.

RL users run one environment per process (SB3 ``SubprocVecEnv``, Gymnasium ``AsyncVectorEnv``, MetaDrive's one
engine per process). If each worker handed its frame to CUDA itself, each would pay the GPU's ~300 us switch
from graphics to compute work per step, the switches would queue on the one GPU, and each worker would hold
a CUDA context (hundreds of MiB). Instead the trainer owns the memory and the workers only use GL::

    # trainer
    slots = gltensor.SharedSlots(count=8, size=(84, 84))          # on the trainer's GPU
    handles = [slots.handle(i) for i in range(8)]                 # picklable: pass them to the workers
    ...                                                           # each worker renders and writes (below)
    obs = torch.from_dlpack(slots.read(channels="rgb"))          # (8, 84, 84, 3) uint8 on cuda, top row first

    # worker i (any start method: spawn, forkserver, fork)
    handle.write(texture_id)                                      # GL copy into the slot; returns when complete
    conn.send(reward)                                             # the usual reply is the trainer's signal

A read copies the slots into a new frame (the conversions fused into the copy), so a frame is never
overwritten by the workers' next step; the slots are double-buffered so that neither side waits for the
other's GPU work. A read refuses slots not written since the previous read (``StaleSlotError``, naming them
and why), so a dead or late worker never yields a stale image.
"""

from __future__ import annotations

import numbers
import os
import weakref
from multiprocessing import context as mp_context
from multiprocessing.reduction import DupFd

from . import _gltensor
from ._gltensor import GL_RENDERBUFFER, GL_TEXTURE_2D, WrongContextError

__all__ = ["SharedSlots", "SlotHandle", "SlotClient", "GLImage", "SLOT_FORMATS"]

# Slot formats by name (GL internal formats of 1, 2 or 4 channels; CUDA textures have no 3-channel form).
SLOT_FORMATS = {
    "rgba8": 0x8058, "r8": 0x8229, "rg8": 0x822B,
    "r16": 0x822A, "rg16": 0x822C, "rgba16": 0x805B,
    "r16f": 0x822D, "rg16f": 0x822F, "rgba16f": 0x881A,
    "r32f": 0x822E, "rg32f": 0x8230, "rgba32f": 0x8814,
    "r8ui": 0x8232, "rg8ui": 0x8238, "rgba8ui": 0x8D7C, "r16ui": 0x8234, "rgba16ui": 0x8D76,
    "r32ui": 0x8236, "rg32ui": 0x823C, "rgba32ui": 0x8D70,
}


def _format_enum(fmt):
    if isinstance(fmt, str):
        key = fmt.lower().removeprefix("gl_")
        if key not in SLOT_FORMATS:
            raise ValueError(f"format {fmt!r} is not a slot format; use one of {', '.join(SLOT_FORMATS)} "
                             "(for RGB images: 'rgba8' and read(channels='rgb'))")
        return SLOT_FORMATS[key]
    if isinstance(fmt, int) and not isinstance(fmt, bool):
        return fmt
    raise TypeError(f"format must be a name such as 'rgba8' or a GL enum, not {type(fmt).__name__}")


class GLImage:
    """What a worker's observation can be when the image is on the GPU: a GL texture or renderbuffer name
    (in the worker's current context) and the rectangle of it to write. ``SlotHandle.write`` and the
    Gymnasium integration accept it."""

    __slots__ = ("name", "target", "region")

    def __init__(self, name, target=GL_TEXTURE_2D, region=None):
        self.name, self.target, self.region = int(name), int(target), region

    def __repr__(self):
        return f"GLImage(name={self.name}, target={self.target:#x}, region={self.region})"


def _gl_source(source, target, region):
    """(name, target, region) for the sources write() accepts: a GL name, a GLImage, or an engine object."""
    if isinstance(source, GLImage):
        return source.name, source.target, source.region if region is None else region
    glo = getattr(source, "glo", None)  # moderngl Texture / Renderbuffer
    if glo is not None:
        kind = type(source).__name__
        return int(glo), GL_RENDERBUFFER if kind == "Renderbuffer" else (target or GL_TEXTURE_2D), region
    return source, target if target is not None else GL_TEXTURE_2D, region


class _Fds:
    """Descriptors this process owns, closed once (by close() or when collected): the three every writer needs, and
    each slot's own (``slots``: slot -> descriptor), which only that slot's writer gets. ``revoke``: registrations of
    descriptors with multiprocessing's resource sharer that close() takes back (see ``_send_fd``)."""

    def __init__(self, memory_fd, control_fd, geometry_fd, slots=None, revoke=None):
        self.memory_fd, self.control_fd, self.geometry_fd = memory_fd, control_fd, geometry_fd
        self.slots = dict(slots or {})
        self.revoke = revoke
        self._finalizer = weakref.finalize(self, _Fds._close, [memory_fd, control_fd, geometry_fd], self.slots,
                                           revoke)

    @staticmethod
    def _close(fds, slots, revoke):
        if revoke is not None:
            _revoke(revoke)
        for fd in [*fds, *slots.values()]:
            if fd is not None and fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        slots.clear()

    def close(self):
        self._finalizer()


def _send_fd(fd, registrations=None):
    """multiprocessing's ``DupFd``, remembering in `registrations` the descriptors handed to its resource sharer.

    A handle pickled outside a process start (sent through a pipe or a queue) travels as a duplicate that the
    resource sharer thread keeps until the receiver fetches it; a receiver that died first never does, and the
    duplicate (a slot's whole memory) would stay in the trainer for good. ``SharedSlots.close()`` takes those back."""
    popen = mp_context.get_spawning_popen()
    if popen is not None or registrations is None:
        return DupFd(fd)
    from multiprocessing import resource_sharer

    dup = resource_sharer.DupFd(fd)
    registrations.append(dup._id)
    return dup


def _refuse(conn, pid):
    """What the resource sharer sends for a descriptor taken back: nothing (the receiver's unpickling fails)."""


def _nothing():
    pass


def _revoke(registrations):
    """Closes the resource sharer's duplicates of `registrations` that no receiver fetched. Reaches into
    ``multiprocessing.resource_sharer`` (no public call does this); where its layout differs, nothing is done."""
    from multiprocessing import resource_sharer

    sharer = getattr(resource_sharer, "_resource_sharer", None)
    cache, lock = getattr(sharer, "_cache", None), getattr(sharer, "_lock", None)
    if not isinstance(cache, dict) or lock is None:
        return
    with lock:
        for _address, key in registrations:
            entry = cache.get(key)
            if entry is not None:
                cache[key] = (_refuse, _nothing)  # a late fetch gets nothing (popping it would print a traceback)
                try:
                    entry[1]()
                except OSError:
                    pass
    registrations.clear()


def _detach(shared, what):
    """The descriptor a ``DupFd`` carried, or ``ClosedError`` when the trainer took it back before it arrived."""
    try:
        return shared.detach()
    except (EOFError, OSError) as e:
        raise _gltensor.ClosedError(
            f"the {what} arrived after the trainer closed its shared slots (its descriptors were taken back): stop "
            "this worker, or attach it to the trainer's new slots") from e


def _mark_worker(device_uuid):
    """This process writes slots of a trainer on a GPU: every headless context it makes (its engine's too) goes on the slots' GPU,
    found through GL alone. Context.headless() would otherwise ask CUDA which EGL device is which, creating a
    CUDA context in a process that must not hold one, and failing outright after fork from a CUDA trainer."""
    os.environ.setdefault("GLTENSOR_EGL_DEVICE_UUID", device_uuid.hex())


# Forked workers inherit the trainer's SharedSlots instead of unpickling them: mark them at the fork.
_LIVE_CUDA_UUIDS = weakref.WeakValueDictionary()


def _after_fork_in_child():
    for slots in list(_LIVE_CUDA_UUIDS.values()):
        if not slots._core.closed:
            _mark_worker(slots._client.device_uuid)
            break


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Shared:
    """What every handle of one client pickles in common (the descriptors every writer needs): one object per client,
    so that handles pickled together unpickle into one client (pickle's memo), which holds their slots only."""

    def __init__(self, client):
        self.client = client

    def __reduce__(self):
        c = self.client
        c._check_open("cannot pickle the handle")
        reg = c._fds.revoke
        mem = _send_fd(c._fds.memory_fd, reg) if c._fds.memory_fd >= 0 else None
        return (SlotClient._rebuild, (mem, _send_fd(c._fds.control_fd, reg), _send_fd(c._fds.geometry_fd, reg), {},
                                      c.count, c.size, c.backend, c.device_uuid))


class SlotClient:
    """The shared slots as a worker sees them: write the slots this process holds, with GL alone.

    Made by unpickling ``SlotHandle`` objects in a worker (the client then holds those handles' slots and no other:
    a handle carries its own slot's memory only), a whole ``SharedSlots`` (every slot), or, after ``fork``, by using
    the inherited ``SharedSlots``. Writers attach lazily, in the first ``write`` of each slot, to the GL context
    current then (a GL context never pickles: the process that writes makes its own). One writer writes each slot:
    a slot another process writes is refused with ``SlotsBusyError`` naming it."""

    def __init__(self, memory_fd, control_fd, geometry_fd, count, size, backend, device_uuid=None, *, slot_fds=None,
                 export=None, revoke=None):
        # geometry_fd: the sealed memfd of the slots' geometry (nobody can change it; the writer checks the seals).
        # slot_fds: the slots this client may write, with their memfds (its own). export: the trainer's own client
        # fetches any slot's from the slots themselves instead (export(slot) -> a new descriptor).
        self._fds = _Fds(memory_fd, control_fd, geometry_fd, slot_fds, revoke)
        self._export = export
        self.count, self.size, self.backend, self.device_uuid = count, size, backend, device_uuid
        self._writers = {}
        self._shared = _Shared(self)
        # The handles of this process share one client (all of a SharedSlots', or all unpickled from one
        # pickle): each holds a reference, and closing a handle closes the client only with the last one,
        # unless a SharedSlots owns it (then its close() does).
        self._handles = 0
        self._owned = False

    @classmethod
    def _rebuild(cls, memory, control, geometry, slots, count, size, backend, device_uuid=None):
        mem = _detach(memory, "slots' memory") if memory is not None else -1
        ctl = _detach(control, "slots' control page")
        geo = _detach(geometry, "slots' geometry")
        fds = {k: _detach(v, f"memory of slot {k}") for k, v in slots.items()}
        if device_uuid:
            _mark_worker(device_uuid)
        return cls(mem, ctl, geo, count, size, backend, device_uuid, slot_fds=fds)

    @property
    def closed(self):
        return self._fds.control_fd is None

    @property
    def slots(self):
        """The slots this client may write (every slot for the trainer's own client)."""
        return range(self.count) if self._export is not None else sorted(self._fds.slots)

    def _check_open(self, what):
        if self.closed:
            raise _gltensor.ClosedError(f"{what}: this slot client was closed (its descriptors are gone); pickle "
                                        "a handle of an open SharedSlots instead")

    def _slot_fd(self, slot):
        """This client's descriptor of `slot`'s memory; refused for a slot it does not hold."""
        fd = self._fds.slots.get(slot)
        if fd is not None:
            return fd
        if self._export is None:
            held = ", ".join(str(k) for k in sorted(self._fds.slots)) or "none"
            raise _gltensor.InvalidArgumentError(
                f"slot {slot} is not this process's to write: a SlotHandle carries its own slot's memory only, and "
                f"this client holds slot(s) {held}; write through the handle of the slot you were given")
        fd = self._export(slot)  # a slot that does not exist: the core's InvalidArgumentError names it
        self._fds.slots[int(slot)] = fd
        return fd

    def __reduce__(self):
        """The whole client: every slot it holds (a pickled ``SharedSlots`` gives every slot to its receiver)."""
        self._check_open("cannot pickle the shared slots")
        reg = self._fds.revoke
        mem = _send_fd(self._fds.memory_fd, reg) if self._fds.memory_fd >= 0 else None
        slots = {k: _send_fd(self._slot_fd(k), reg) for k in self.slots}
        return (SlotClient._rebuild,
                (mem, _send_fd(self._fds.control_fd, reg), _send_fd(self._fds.geometry_fd, reg), slots, self.count,
                 self.size, self.backend, self.device_uuid))

    def headless_context(self, **kwargs):
        """A headless GL context for a worker that renders itself: on the slots' GPU, found through GL alone
        (no CUDA call, so the worker creates no CUDA context, and it works after fork from a trainer that uses
        CUDA); where the trainer has no GPU (CPU slots without CUDA), the default headless context."""
        if self.device_uuid:
            return _gltensor.Context.headless(device_uuid=self.device_uuid, **kwargs)
        return _gltensor.Context.headless(**kwargs)

    def writer(self, slot):
        """The attached ``_SlotWriter`` of `slot` (attaching it now, in the current GL context)."""
        w = self._writers.get(slot)
        if w is None or w.closed:
            if self._fds.control_fd is None:
                raise _gltensor.ClosedError("this slot client was closed")
            w = _gltensor._SlotWriter(self._fds.memory_fd, self._fds.control_fd, self._fds.geometry_fd,
                                      self._slot_fd(slot), slot)
            self._writers[slot] = w
        return w

    def write(self, slot, source, target=None, *, region=None):
        """Copy a rendered image into `slot` on the GPU; returns once the copy is complete.

        `source`: a texture name (``target`` defaults to GL_TEXTURE_2D), a renderbuffer name with
        ``target=GL_RENDERBUFFER``, a ``GLImage``, a moderngl Texture/Renderbuffer, or a host array (H, W, C)
        of the slot's dtype (written with ``write_host``). `region` = (x, y, w, h) in GL window coordinates:
        the part of a larger image to write (its size must be the slots')."""
        # A GL name may be a NumPy integer (PyOpenGL's glGenTextures returns numpy.uint32), which also has
        # __array_interface__: integers are names, other array-likes are host images.
        if not isinstance(source, numbers.Integral) and (hasattr(source, "__array_interface__")
                                                          or hasattr(source, "__array__")):
            return self.write_host(slot, source)
        name, target, region = _gl_source(source, target, region)
        w = self.writer(slot)
        try:
            return w.write(name, target, region=region)
        except WrongContextError:
            # The engine made a new GL context (an environment closed and made again): attach there.
            w.close()
            return self.writer(slot).write(name, target, region=region)

    def write_host(self, slot, array):
        """Write a host image (H, W, C) of the slot's dtype, top row first (observations that are arrays)."""
        import numpy as np

        return self.writer(slot).write_host(np.ascontiguousarray(array))

    def close(self):
        """Detach every writer and close this process's descriptors (idempotent)."""
        for w in self._writers.values():
            w.close()
        self._writers.clear()
        self._fds.close()
        self._fds.memory_fd = self._fds.control_fd = self._fds.geometry_fd = None

    def _release_handle(self, slot):
        """A handle of `slot` was closed: detach its writer; close the client with its last handle."""
        self._handles -= 1
        w = self._writers.pop(slot, None)
        if w is not None:
            w.close()
        if self._handles <= 0 and not self._owned:
            self.close()


class SlotHandle:
    """One slot, for the one worker that writes it: picklable into any ``multiprocessing`` start method.

    It carries that slot's memory and no other slot's: the worker that unpickles it can write its slot only.
    ``close()`` closes this handle only: the other handles of the same slots in this process (which share
    one client) keep working; the descriptors close with the last handle (or with the trainer's
    ``SharedSlots.close()``)."""

    def __init__(self, client, slot):
        self.client, self.slot = client, slot
        self._closed = False
        client._handles += 1

    def _check_open(self, what):
        if self._closed:
            raise _gltensor.ClosedError(f"{what}: slot handle {self.slot} was closed")

    def __reduce__(self):
        self._check_open("cannot pickle the handle")
        c = self.client
        c._check_open("cannot pickle the handle")
        return (SlotHandle._rebuild, (c._shared, self.slot, _send_fd(c._slot_fd(self.slot), c._fds.revoke)))

    @classmethod
    def _rebuild(cls, client, slot, slot_fd):
        """A handle arriving in a worker: its client (shared with the handles that came in the same pickle) gets
        this slot's memory."""
        fd = _detach(slot_fd, f"memory of slot {slot}")
        old = client._fds.slots.get(slot)
        if old is not None:  # the same slot twice in one pickle: one descriptor is enough
            os.close(fd)
        else:
            client._fds.slots[slot] = fd
        return cls(client, slot)

    def write(self, source, target=None, *, region=None):
        """``SlotClient.write`` for this handle's slot."""
        self._check_open("cannot write")
        return self.client.write(self.slot, source, target, region=region)

    def write_host(self, array):
        self._check_open("cannot write")
        return self.client.write_host(self.slot, array)

    def close(self):
        """Close this handle (idempotent); see the class doc."""
        if not self._closed:
            self._closed = True
            self.client._release_handle(self.slot)

    def headless_context(self, **kwargs):
        """``SlotClient.headless_context``: a GL context on the slots' GPU, made without CUDA."""
        return self.client.headless_context(**kwargs)

    def __repr__(self):
        return f"SlotHandle(slot={self.slot} of {self.client.count}, size={self.client.size}, {self.client.backend})"


class SharedSlots:
    """N image slots that worker processes write with GL and this process reads as one (N, H, W, C) frame.

    ``count`` slots of ``size`` = (width, height) pixels of ``format`` ('rgba8' by default; see
    ``SLOT_FORMATS``). ``backend='cuda'``: device memory of this process's GPU (``cuda_device``, by default
    ``LOCAL_RANK``'s or 0), which the workers' GL writes into; ``'cpu'``: shared host memory; ``'auto'``: CUDA
    when this process can use it. ``buffers=3`` (the default) lets the workers write one set of slots while the
    two read last may still be in use: a copy still queued on the trainer's stream, or a zero-copy view still
    alive (a read waits for the GPU only when such work is still queued: ``read_waits`` counts those);
    ``buffers=2`` allows one of them; ``buffers=1`` makes each read wait for its copy and refuses views.

    Pass ``slots.handle(i)`` (or the ``SharedSlots`` itself) to worker i; it pickles by descriptor, so any
    ``multiprocessing`` start method works. ``read()`` takes the options of every gltensor read
    (``channels``, ``dtype``, ``layout``, ``flip``, ``stream``, ``out``), fused into its one copy.
    ``read(copy=False)`` copies nothing: it returns the set the workers just wrote as a (N, H, W, C) frame of the
    slots' own format, top row first, whose rows and images keep the slots' padding (non-contiguous strides
    where a row is not a multiple of 256 bytes). The workers write the other sets meanwhile; the set goes back to
    them only after that frame and every tensor made from it are gone and the work queued on their streams is
    done. So at most ``buffers - 1`` views may live at once: a read that would need a set a view still holds
    raises ``SlotsBusyError`` and changes nothing (drop or ``.clone()`` the older view). A loop that keeps the
    previous step's observation while it reads the next one fits the default three sets."""

    def __init__(self, count, size, *, format="rgba8", backend="auto", cuda_device=None, buffers=3):
        width, height = size
        self._core = _gltensor._Slots(count, width, height, _format_enum(format), backend=backend,
                                      cuda_device=cuda_device, buffers=buffers)
        self._owner = os.getpid()
        # Descriptors kept for the workers: dup'ed for each pickle, inherited as they are by forked workers
        # (which must not call CUDA to export new ones).
        uuid = self._core.device_uuid
        uuid = uuid if any(uuid) else None  # zeros: no CUDA here
        # Each slot's own descriptor is fetched from the core when a writer or a handle of it first needs it; the
        # descriptors handed to multiprocessing's resource sharer are taken back by close().
        self._client = SlotClient(*self._core._export(), count, (width, height), self._core.backend, uuid,
                                  export=self._core._export_slot, revoke=[])
        self._client._owned = True  # closed by close() below, never by one of its handles
        if uuid:
            _LIVE_CUDA_UUIDS[id(self)] = self

    # -- the trainer's side --
    def read(self, *args, copy=True, **kwargs):
        """Every slot as one frame (see the class doc); ``StaleSlotError`` when a slot was not written since the
        last read. ``copy=False``: the slots themselves, no copy (``ValueError`` when the options ask for a
        conversion or with ``out=``; ``SlotsBusyError`` when the set the workers need next is still viewed)."""
        if copy:
            return self._core.read(*args, **kwargs)
        if kwargs.get("out") is not None:
            raise ValueError("read(copy=False) hands out the slots themselves; out= asks for a copy into your "
                             "buffer (use copy=True)")
        kwargs.pop("out", None)
        return self._core.read_view(*args, **kwargs)

    def state(self, slot):
        """(state, pid): 'fresh' (written since the last read), 'stale', 'writing' or 'writer_gone'."""
        return self._core.state(slot)

    def states(self):
        return [self._core.state(i)[0] for i in range(self._core.count)]

    def handle(self, slot):
        """A picklable handle with which worker `slot` writes its slot."""
        if not 0 <= slot < self._core.count:
            raise IndexError(f"slot {slot} does not exist: there are {self._core.count} slots")
        return SlotHandle(self._client, slot)

    def handles(self):
        return [self.handle(i) for i in range(self._core.count)]

    # -- the worker's side, for workers that got the SharedSlots itself (fork, or Gymnasium's shared memory) --
    def write(self, slot, source, target=None, *, region=None):
        return self._client.write(slot, source, target, region=region)

    def write_host(self, slot, array):
        return self._client.write_host(slot, array)

    def __reduce__(self):
        """Every slot: the receiver may write any of them (what Gymnasium's ``AsyncVectorEnv`` hands each worker, as it
        hands them its shared memory). Give a worker ``handle(i)`` instead where it must write its slot only."""
        if self._core.closed and os.getpid() == self._owner:
            raise _gltensor.ClosedError("cannot pickle the SharedSlots: they were closed")
        return (SlotClient._rebuild, self._client.__reduce__()[1])

    def close(self):
        """Free the slots here; workers' next writes fail with ClosedError (idempotent)."""
        # The descriptors first: the device memory goes back to the driver once the last handle on it is gone.
        self._client.close()
        if os.getpid() == self._owner:
            self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return self._core.count

    def __getattr__(self, name):  # count, size, shape, dtype, format, backend, backend_reason, cuda_device, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._core, name)

    def __repr__(self):
        if self._core.closed:
            return "SharedSlots(closed)"
        return (f"SharedSlots(count={self._core.count}, size={self._core.size}, format={self._core.format}, "
                f"backend={self._core.backend!r}, cuda_device={self._core.cuda_device}, buffers={self._core.buffers})")
