"""A second write into a slot in the same step that fails partway (after the slot was marked being written) leaves
the slot stale, never fresh, and the image the first write put there exactly as it was (issue 34: the slot used to
stay fresh, and on the CPU backend the failed glReadPixels was followed by a reversal of the good image's rows in
place).

No input fails a GL write midway here: every source that GL could refuse is refused before the write starts (image
query, region, format checks), and Mesa resolves multisampled sources of any colour format. So the failure comes
from the extension's test-only hook, `_gltensor._slots_fail_next_write_for_testing()`: the next GL write of this
process fails where its copy would run, as a GL error there does (nothing reaches the slot)."""
import mmap
import os
import struct

import numpy as np
import pytest
from OpenGL import GL

import glhelpers
import gltensor
from gltensor import _gltensor

W, H = 37, 23


@pytest.fixture(params=["auto", "other"])
def write_path(request, backend, monkeypatch):
    """Each way a write moves the pixels on this backend (as tests/test_slots.py's fixture of the same name)."""
    if request.param == "auto":
        monkeypatch.delenv("GLTENSOR_SLOTS_WRITE", raising=False)
        return "shader" if backend == "cuda" else "readpixels"
    monkeypatch.setenv("GLTENSOR_SLOTS_WRITE", "copy" if backend == "cuda" else "shader")
    return "copy" if backend == "cuda" else "shader"


def _texture(rng):
    """A texture of random RGBA8 pixels; returns (name, the image as slots store it: top row first)."""
    data = rng.integers(0, 256, (H, W, 4), dtype=np.uint8)  # GL's rows: bottom first
    name = glhelpers.gen_texture()
    glhelpers.tex_image(name, GL.GL_TEXTURE_2D, "RGBA8", W, H, data)
    return name, data[::-1]


def _slot_pixels(slots, slot):
    """CPU backend: slot `slot` of the set the workers write now, as stored (top row first), straight from the
    slot's own memory (the trainer refuses to read a stale slot). The layout comes from the sealed geometry:
    pixel_offset at byte 88, slot_bytes at 56, row_pitch at 48 of glt_slots_header (tests/test_slots_trust.py)."""
    mem, ctl, geo = slots._core._export()
    fd = slots._core._export_slot(slot)
    try:
        header = os.pread(geo, 4096, 0)
        pitch, slot_bytes, pixel_offset = (struct.unpack_from("<Q", header, off)[0] for off in (48, 56, 88))
        assert (pitch, slot_bytes) == (slots.row_pitch, slots.slot_bytes)
        offset = pixel_offset + (slots.reads % slots.buffers) * slot_bytes
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
            rows = np.frombuffer(m, np.uint8, count=pitch * H, offset=offset).reshape(H, pitch)
            image = rows[:, : W * 4].reshape(H, W, 4).copy()
            del rows  # the mapping closes only once no array points into it
        return image
    finally:
        for fd in (mem, ctl, geo, fd):
            if fd >= 0:
                os.close(fd)


def test_a_failed_second_write_leaves_the_slot_stale_and_its_image_intact(backend, write_path, gl):
    rng = np.random.default_rng(34)
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    textures = []
    try:
        for step in range(2):  # the second step's set differs from the first's: nothing carried over
            good = []
            for slot in range(2):
                name, image = _texture(rng)
                textures.append(name)
                slots.write(slot, name)
                good.append(image)
            if step == 1:
                break
            np.testing.assert_array_equal(glhelpers.to_numpy(slots.read()), np.stack(good))
        assert slots._client.writer(0).write_path == write_path
        assert slots.state(0)[0] == "fresh"
        before = _slot_pixels(slots, 0) if backend == "cpu" else None
        if before is not None:
            np.testing.assert_array_equal(before, good[0])

        # The same step, a second write of another image into slot 0 fails in its copy.
        other, _ = _texture(rng)
        textures.append(other)
        _gltensor._slots_fail_next_write_for_testing()
        with pytest.raises(gltensor.GLError, match=r"into shared slot 0 .* keeps its last image"):
            slots.write(0, other)

        assert slots.state(0)[0] == "stale"
        assert slots.state(1)[0] == "fresh"
        if before is not None:
            np.testing.assert_array_equal(_slot_pixels(slots, 0), before, err_msg="the failed write changed the image")
        with pytest.raises(gltensor.StaleSlotError, match=r"\(slot 0: [^;]*\)"):
            slots.read()
        # Written again, the slot is fresh and the read returns every slot exactly.
        slots.write(0, textures[-3])
        np.testing.assert_array_equal(glhelpers.to_numpy(slots.read()), np.stack(good))
    finally:
        GL.glDeleteTextures(len(textures), textures)
        slots.close()
