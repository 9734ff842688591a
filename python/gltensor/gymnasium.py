"""Gymnasium: shared slots behind the stock ``AsyncVectorEnv(..., shared_memory=True)``, no custom worker.

Gymnasium moves observations through shared memory by dispatching ``create_shared_memory``,
``read_from_shared_memory`` and ``write_to_shared_memory`` (``gymnasium.vector.utils``) on the observation
Space's type. This module registers ``SlotSpace`` (a ``Box``) for the three, so an environment whose
observation space is a ``SlotSpace`` and whose ``reset``/``step`` return a ``GLImage`` (or a host array)
runs under the stock class, each worker writing its frame into its slot with GL alone::

    # the environment (in an importable module: a class defined in __main__ is pickled by value under
    # spawn/forkserver and Gymnasium's dispatch no longer recognises its space)
    class MyEnv(gymnasium.Env):
        observation_space = SlotSpace(84, 84, 3)             # (height, width, channels), uint8
        def step(self, action):
            ...render into self.texture...
            return gltensor.GLImage(self.texture), reward, terminated, truncated, {}

    # the trainer
    envs = gymnasium.vector.AsyncVectorEnv([MyEnv] * 8, shared_memory=True)   # copy=True: the default
    obs, info = envs.reset(seed=0)                          # (8, 84, 84, 3) uint8 torch tensor, top row first
    obs, rew, term, trunc, info = envs.step(actions)        # one read of all slots per step

What ``AsyncVectorEnv`` does with them (Gymnasium 1.x): it calls ``read_from_shared_memory`` once, at
construction, keeps what it returns as ``self.observations`` (the only reference to the shared memory it
keeps), and each ``reset``/``step`` returns ``deepcopy(self.observations)`` (``copy=True``) or
``self.observations`` itself (``copy=False``). So what ``read_from_shared_memory`` returns here is a
``SlotBatch``: it owns the ``SharedSlots``, and its ``__deepcopy__`` *is the read*: one read of every slot
per step into a fresh frame (the space's ``channels``/``dtype``/``layout``/``flip`` fused into the copy),
returned as a torch tensor (``read_as='torch'``, the default; CUDA on the CUDA backend), a NumPy array
(``'numpy'``: host memory, copied to the host on the CUDA backend) or the gltensor ``Frame`` (``'frame'``).
With ``copy=False`` the step returns the ``SlotBatch`` itself: ``batch.latest()``, ``torch.from_dlpack(batch)``
or ``numpy.asarray(batch)`` read the slots once after each step (later calls in the same step return that
same frame). Where the space asks for the slots as they are stored (``SlotSpace(h, w, 4)`` over 'rgba8' slots:
uint8, HWC, top row first) that read copies nothing: it is a zero-copy view of the slots the workers just wrote
(``SharedSlots.read(copy=False)``, ``SlotBatch.zero_copy``), which the workers never write while it, or a tensor
made from it, lives; keep at most the previous step's besides the current one (``SlotsBusyError`` otherwise;
``.clone()`` what you keep longer). Other spaces read a converted copy. Either way a frame handed out is never
overwritten by the workers' next step, so work still queued on the trainer's stream is safe.

Limits: ``shared_memory=True`` is required (without it the workers would pickle a ``GLImage``, a name in a
GL context the trainer does not have). A partial reset (``options={'reset_mask': ...}``) leaves the other
slots unwritten and the read refuses them (``StaleSlotError``). With ``autoreset_mode=SAME_STEP``,
``info['final_obs']`` travels through the pipe as the worker returned it (a ``GLImage`` there is only a
name). ``AsyncVectorEnv.close()`` leaves the slots open (Gymnasium never closes its shared memory; a
``copy=False`` batch still gives its last frame): ``envs.observations.close()`` frees them at once, else the
garbage collector does. Only this module imports gymnasium; ``import gltensor`` never does.
"""

from __future__ import annotations

import numpy as np
from gymnasium.spaces import Box
from gymnasium.vector.utils import (
    batch_space,
    concatenate,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from .slots import SLOT_FORMATS, GLImage, SharedSlots

__all__ = ["SlotSpace", "SlotBatch", "host_image_for_slot"]

_CHANNELS = {1: "r", 2: "rg", 3: "rgb", 4: "rgba"}
_DTYPES = {"uint8": (np.uint8, 0, 255), "float32": (np.float32, 0.0, 1.0),
           "float16": (np.float16, 0.0, 1.0)}
_READ_AS = ("torch", "numpy", "frame")


class SlotSpace(Box):
    """The observation space of an environment whose observations go through shared slots.

    A ``Box`` of shape (height, width, channels) (``layout='chw'``: (channels, height, width)) and ``dtype``
    (uint8 in [0, 255], or float32/float16 in [0, 1], normalised in the read), so the usual shape/dtype checks
    work. The observation an environment returns may be a ``GLImage`` (a texture or renderbuffer in the
    worker's current GL context; written on the GPU by GL), a GL texture name, a moderngl texture, or a host
    array of this space's shape (uint8 for 'rgba8' slots). The slots hold ``format`` (default 'rgba8';
    ``channels`` picks what the read returns, e.g. 3: 'rgb'); ``backend`` is the slots' ('auto', 'cuda',
    'cpu'); ``flip=True`` returns the top row first, as every gltensor read; ``read_as`` says what each step
    returns: 'torch' (default), 'numpy' or 'frame'."""

    def __init__(self, height, width, channels=3, *, format="rgba8", backend="auto", dtype="uint8",
                 layout="hwc", flip=True, read_as="torch", seed=None):
        height, width, channels = int(height), int(width), int(channels)
        if channels not in _CHANNELS:
            raise ValueError(f"channels must be 1, 2, 3 or 4, not {channels}")
        if dtype in ("float", float, "int", int):  # as every gltensor dtype=: NumPy and torch disagree on the size
            raise ValueError(f"dtype {dtype!r} is ambiguous: NumPy reads it as 64-bit, torch as 32-bit; name the size "
                             f"you mean, e.g. 'float32'")
        dtype_name = np.dtype(dtype).name
        if dtype_name not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, not {dtype_name}")
        layout = str(layout).lower()
        if layout not in ("hwc", "chw"):
            raise ValueError(f"layout must be 'hwc' or 'chw', not {layout!r}")
        if read_as not in _READ_AS:
            raise ValueError(f"read_as must be one of {', '.join(_READ_AS)}, not {read_as!r}")
        np_dtype, low, high = _DTYPES[dtype_name]
        shape = (height, width, channels) if layout == "hwc" else (channels, height, width)
        super().__init__(low=low, high=high, shape=shape, dtype=np_dtype, seed=seed)
        self.image_size = (width, height)
        self.channels, self.slot_format, self.backend = channels, format, backend
        self.layout, self.flip, self.read_as = layout, bool(flip), read_as

    @property
    def read_options(self):
        """The keyword arguments of ``SharedSlots.read`` that give this space's observations."""
        return {"channels": _CHANNELS[self.channels], "dtype": self.dtype.name, "layout": self.layout,
                "flip": self.flip}

    def contains(self, x):
        # A worker's observation is a GL image (checked when it is written) or an array of this shape.
        if isinstance(x, GLImage):
            return True
        return super().contains(x)

    def __eq__(self, other):
        return (isinstance(other, SlotSpace) and super().__eq__(other)
                and (self.slot_format, self.flip) == (other.slot_format, other.flip))

    __hash__ = None  # as Box

    def __repr__(self):
        w, h = self.image_size
        return (f"SlotSpace({h}, {w}, {self.channels}, dtype={self.dtype.name}, layout={self.layout!r}, "
                f"format={self.slot_format!r}, backend={self.backend!r}, read_as={self.read_as!r})")


class SlotBatch:
    """What ``read_from_shared_memory`` returns for a ``SlotSpace``: the trainer's view of the slots.

    ``AsyncVectorEnv`` keeps it as its observations; it owns the ``SharedSlots`` (so the shared memory lives as
    long as the vector env). ``copy.deepcopy(batch)`` (what ``copy=True`` does each step) reads every slot
    into a fresh frame, converted as the space says. With ``copy=False`` the step returns this object:
    ``latest()`` (also behind ``__dlpack__`` and ``__array__``) reads once after each step."""

    def __init__(self, space, slots):
        self.space, self.slots = space, slots
        self._frame = None
        # The space asks for the slots as stored: copy=False reads hand out the slots themselves.
        self.zero_copy = (space.channels == slots.shape[-1] and space.dtype == np.dtype(slots.dtype)
                          and space.layout == "hwc" and space.flip)

    def read(self, *, out=None, stream=None, copy=True):
        """A new read of every slot (the gltensor ``Frame``, or `out`); ``StaleSlotError`` when a slot was not
        written since the previous read. ``copy=False`` (only where ``zero_copy``): a view of the slots."""
        if out is None:
            self._frame = None  # the previous step's frame (a view holds its set) is dropped before this read
        frame = self.slots.read(out=out, stream=stream, copy=copy, **self.space.read_options)
        if out is None:
            self._frame = frame
        return frame

    def latest(self):
        """The current step's frame: read now if a worker wrote since the last read, else the frame read then
        (a zero-copy view of the slots where ``zero_copy``, else a copy). Only a fresh write is new data: a
        slot whose writer exited (a crash, ``AsyncVectorEnv.close()``) or is writing now leaves the frame of
        this step as it was; the next step's read names such a slot (``StaleSlotError``)."""
        if self._frame is None or any(s == "fresh" for s in self.slots.states()):
            return self.read(copy=not self.zero_copy)
        return self._frame

    def convert(self, frame):
        """`frame` as the space's ``read_as`` says."""
        if self.space.read_as == "frame":
            return frame
        import torch  # noqa: F401  (numpy on CUDA goes through torch)

        tensor = torch.from_dlpack(frame)
        if self.space.read_as == "torch":
            return tensor
        return tensor.cpu().numpy()

    def __deepcopy__(self, memo):
        return self.convert(self.read())

    def __copy__(self):
        return self.convert(self.read())

    # -- copy=False: the batch itself stands for the current observation --
    def __dlpack__(self, *args, **kwargs):
        return self.latest().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.latest().__dlpack_device__()

    def __array__(self, dtype=None, copy=None):
        """NumPy 2's protocol: ``copy=True`` (``numpy.array(batch)``) returns an array of its own, which neither
        aliases the slots nor holds a set of them (keep as many as you like); ``copy=None``
        (``numpy.asarray``) may return the current frame itself (a zero-copy view of host slots: it holds
        its set while it lives); ``copy=False`` raises ``ValueError`` where an array needs a copy (CUDA
        slots, a dtype change)."""
        frame = self.latest()
        if frame.device == "cpu":
            arr = np.from_dlpack(frame)
        else:
            if copy is False:
                raise ValueError(f"the slots are in {frame.device} memory: a NumPy array of them needs a copy "
                                 "to the host (use copy=None or copy=True)")
            import torch

            arr = torch.from_dlpack(frame).cpu().numpy()
            copy = None  # already a host copy of its own
        if copy is False:
            if dtype is not None and np.dtype(dtype) != arr.dtype:
                raise ValueError(f"the batch is {arr.dtype}: a {np.dtype(dtype)} array of it needs a copy "
                                 "(use copy=None or copy=True)")
            return arr
        if copy:
            return np.array(arr, dtype=dtype, copy=True)
        return np.asarray(arr, dtype=dtype)

    @property
    def shape(self):
        return (len(self.slots), *self.space.shape)

    @property
    def dtype(self):
        return self.space.dtype

    def __len__(self):
        return len(self.slots)

    @property
    def backend(self):
        """The slots' backend ("cuda" or "cpu")."""
        return self.slots.backend

    def close(self):
        self.slots.close()

    def __repr__(self):
        return f"SlotBatch({self.slots!r}, {self.space!r})"


def _slot_channels(fmt):
    name = fmt if isinstance(fmt, str) else next((k for k, v in SLOT_FORMATS.items() if v == fmt), "rgba")
    name = name.lower().removeprefix("gl_")
    return len(name) - len(name.lstrip("rgba"))


_FLOAT_SLOTS = {"r16f": np.float16, "rg16f": np.float16, "rgba16f": np.float16,
                "r32f": np.float32, "rg32f": np.float32, "rgba32f": np.float32}


def _slot_name(fmt):
    if isinstance(fmt, str):
        return fmt.lower().removeprefix("gl_")
    return next((k for k, v in SLOT_FORMATS.items() if v == fmt), None)


def host_image_for_slot(arr, slot_format="rgba8", layout="hwc"):
    """A host observation as an 8-bit or float slot stores it: (H, W, slot channels), top row first (the missing
    channels of an RGB image in an RGBA slot are filled opaque: 255, or 1.0 in a float slot). Into 8-bit
    slots float images in [0, 1] are scaled to [0, 255]; into float slots ('rgba16f', 'rgba32f', ...) uint8
    images are scaled to [0, 1] and float ones converted to the slot's float type."""
    arr = np.asarray(arr)
    if layout == "chw":
        arr = arr.transpose(1, 2, 0)
    name = _slot_name(slot_format)
    if name in ("rgba8", "rg8", "r8"):
        if arr.dtype.kind == "f":
            arr = np.clip(np.rint(arr * 255.0), 0, 255).astype(np.uint8)
        opaque = 255
    elif name in _FLOAT_SLOTS:
        slot_dtype = _FLOAT_SLOTS[name]
        if arr.dtype == np.uint8:
            arr = (arr / np.float32(255.0)).astype(slot_dtype)
        else:
            arr = arr.astype(slot_dtype, copy=False)
        opaque = 1.0
    else:
        return arr
    missing = _slot_channels(slot_format) - arr.shape[2]
    if missing > 0:
        arr = np.concatenate([arr, np.full(arr.shape[:2] + (missing,), opaque, arr.dtype)], axis=2)
    return arr


def _host_image(space, value):
    arr = np.asarray(value)
    if arr.shape != space.shape:
        raise ValueError(f"the observation has shape {arr.shape}; the SlotSpace's is {space.shape}")
    return host_image_for_slot(arr, space.slot_format, space.layout)


@create_shared_memory.register(SlotSpace)
def _create_slots(space, n=1, ctx=None):
    # ctx (the multiprocessing context) is not needed: the slots pickle by descriptor into any start method.
    return SharedSlots(n, space.image_size, format=space.slot_format, backend=space.backend)


@read_from_shared_memory.register(SlotSpace)
def _read_slots(space, shared_memory, n=1):
    if not isinstance(shared_memory, SharedSlots):
        raise TypeError("read_from_shared_memory(SlotSpace) runs in the process that made the slots "
                        f"(got {type(shared_memory).__name__})")
    if len(shared_memory) != n:
        raise ValueError(f"the shared slots hold {len(shared_memory)} images, not {n}")
    return SlotBatch(space, shared_memory)


@write_to_shared_memory.register(SlotSpace)
def _write_slot(space, index, value, shared_memory):
    # shared_memory: a SlotClient (spawn, forkserver: unpickled from descriptors) or the SharedSlots itself
    # (fork). The writer attaches to this process's current GL context at its first write.
    if isinstance(value, np.ndarray) or (hasattr(value, "__array__") and not isinstance(value, GLImage)
                                         and not hasattr(value, "glo") and not np.isscalar(value)):
        shared_memory.write_host(index, _host_image(space, value))
    else:
        shared_memory.write(index, value)


@concatenate.register(SlotSpace)
def _concatenate(space, items, out):
    if any(isinstance(x, GLImage) for x in items):
        raise TypeError("a SlotSpace's GLImage observations go through shared slots: use "
                        "AsyncVectorEnv(..., shared_memory=True) (without shared memory, or in SyncVectorEnv, "
                        "the environment must return host arrays)")
    return np.stack([np.asarray(x) for x in items], axis=0, out=out)


@batch_space.register(SlotSpace)
def _batch(space, n=1):
    return Box(low=0 if space.dtype == np.uint8 else 0.0, high=space.high.flat[0],
               shape=(n, *space.shape), dtype=space.dtype)
