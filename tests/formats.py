"""The one table of capturable formats the tests use, and how to make exact data for each.

Every entry says how the tests upload and read back the format through OpenGL (GL format and
type) and what gltensor must report for it (dtype, channels, format name). The list is the one
in docs/python-api.md; `UNSUPPORTED_COLOR` holds colour formats outside it that must be refused.
"""

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402
from OpenGL import GL  # noqa: E402


@dataclass(frozen=True)
class Fmt:
    key: str  # short id used in test ids ("RGBA8", "unsized_RGBA")
    internal: int  # internal format passed to glTexImage2D / glRenderbufferStorage
    dtype: str  # numpy dtype name gltensor reports
    channels: int
    gl_format: int  # client format for upload and read-back
    gl_type: int  # client type for upload and read-back
    reported: str  # what Capture.format must say

    @property
    def np_dtype(self):
        return np.dtype(self.dtype)

    @property
    def is_integer(self):
        return self.gl_format in (GL.GL_RED_INTEGER, GL.GL_RG_INTEGER, GL.GL_RGB_INTEGER, GL.GL_RGBA_INTEGER)


_CLIENT = {
    # (channels, integer?) -> GL client format
    (1, False): GL.GL_RED,
    (2, False): GL.GL_RG,
    (3, False): GL.GL_RGB,
    (4, False): GL.GL_RGBA,
    (1, True): GL.GL_RED_INTEGER,
    (2, True): GL.GL_RG_INTEGER,
    (3, True): GL.GL_RGB_INTEGER,
    (4, True): GL.GL_RGBA_INTEGER,
}
_TYPE = {
    "uint8": GL.GL_UNSIGNED_BYTE,
    "uint16": GL.GL_UNSIGNED_SHORT,
    "uint32": GL.GL_UNSIGNED_INT,
    "float16": GL.GL_HALF_FLOAT,
    "float32": GL.GL_FLOAT,
}


def _fmt(name, dtype, channels, integer=False, key=None, reported=None, internal=None):
    return Fmt(
        key=key or name,
        internal=internal if internal is not None else getattr(GL, "GL_" + name),
        dtype=dtype,
        channels=channels,
        gl_format=_CLIENT[(channels, integer)],
        gl_type=_TYPE[dtype],
        reported=reported or "GL_" + name,
    )


FORMATS = [
    _fmt("RGBA8", "uint8", 4),
    _fmt("RGB8", "uint8", 3),
    _fmt("SRGB8_ALPHA8", "uint8", 4),  # raw sRGB-encoded bytes come back, no decoding
    _fmt("R8", "uint8", 1),
    _fmt("RG8", "uint8", 2),
    _fmt("R16", "uint16", 1),
    _fmt("RG16", "uint16", 2),
    _fmt("RGBA16", "uint16", 4),
    _fmt("R16F", "float16", 1),
    _fmt("RG16F", "float16", 2),
    _fmt("RGBA16F", "float16", 4),
    _fmt("R32F", "float32", 1),
    _fmt("RG32F", "float32", 2),
    _fmt("RGBA32F", "float32", 4),
    _fmt("R8UI", "uint8", 1, integer=True),
    _fmt("RG8UI", "uint8", 2, integer=True),
    _fmt("RGBA8UI", "uint8", 4, integer=True),
    _fmt("R16UI", "uint16", 1, integer=True),
    _fmt("RGBA16UI", "uint16", 4, integer=True),
    _fmt("R32UI", "uint32", 1, integer=True),
    _fmt("RG32UI", "uint32", 2, integer=True),
    _fmt("RGBA32UI", "uint32", 4, integer=True),
    # unsized base formats: GL picks the storage, gltensor reports the 8-bit sized name
    _fmt("RGBA", "uint8", 4, key="unsized_RGBA", reported="GL_RGBA8"),
    _fmt("RGB", "uint8", 3, key="unsized_RGB", reported="GL_RGB8"),
]
BY_KEY = {f.key: f for f in FORMATS}
RGBA8 = BY_KEY["RGBA8"]

# Colour formats that are valid GL but outside the documented list: must be UnsupportedFormatError.
# (internal format, client format, client type, name gltensor should print)
UNSUPPORTED_COLOR = [
    (GL.GL_R8I, GL.GL_RED_INTEGER, GL.GL_BYTE, "GL_R8I"),
    (GL.GL_RGBA8_SNORM, GL.GL_RGBA, GL.GL_BYTE, "GL_RGBA8_SNORM"),
    (GL.GL_RGB10_A2, GL.GL_RGBA, GL.GL_UNSIGNED_INT_2_10_10_10_REV, "GL_RGB10_A2"),
    (GL.GL_R11F_G11F_B10F, GL.GL_RGB, GL.GL_FLOAT, "GL_R11F_G11F_B10F"),
    (GL.GL_COMPRESSED_RED_RGTC1, GL.GL_RED, GL.GL_UNSIGNED_BYTE, "GL_COMPRESSED_RED_RGTC1"),
]

# Depth and depth-stencil formats: (internal format, client format, client type, name)
DEPTH_FORMATS = [
    (GL.GL_DEPTH_COMPONENT16, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_SHORT, "GL_DEPTH_COMPONENT16"),
    (GL.GL_DEPTH_COMPONENT24, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT, "GL_DEPTH_COMPONENT24"),
    (GL.GL_DEPTH_COMPONENT32F, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT, "GL_DEPTH_COMPONENT32F"),
    (GL.GL_DEPTH24_STENCIL8, GL.GL_DEPTH_STENCIL, GL.GL_UNSIGNED_INT_24_8, "GL_DEPTH24_STENCIL8"),
]


def random_data(fmt, width, height, seed=0):
    """(H, W, C) data that the format stores exactly, row 0 = GL's bottom row."""
    rng = np.random.default_rng([seed, width, height, fmt.internal])
    shape = (height, width, fmt.channels)
    dt = fmt.np_dtype
    if dt.kind == "u":
        return rng.integers(0, np.iinfo(dt).max, size=shape, dtype=dt, endpoint=True)
    if dt == np.float16:
        # multiples of 1/64 in [-32, 32]: 11 significant bits at most, never subnormal, exact in half
        return (rng.integers(-2048, 2048, size=shape, endpoint=True) / 64.0).astype(np.float16)
    # float32 values are exact in GL_*32F by construction; spread them over many exponents
    mags = rng.standard_normal(size=shape) * np.exp2(rng.integers(-20, 20, size=shape))
    return mags.astype(np.float32)


def solid(fmt, width, height, value):
    """(H, W, C) constant data of the format's dtype."""
    return np.full((height, width, fmt.channels), value, dtype=fmt.np_dtype)
