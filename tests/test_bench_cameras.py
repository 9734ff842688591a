"""The benchmark cameras' draws (gltensor/bench/scenes.py, Cameras): what every suite path is checked against.

The suite checks each path against glReadPixels of the cameras, so a draw that gave every camera or every step
the same picture would let swapped cameras, flips or stale frames pass. These tests pin the pictures down:
the "pattern" draw (the suite's default) gives exactly the computed colours, camera k's atlas tile equals its
own texture for every draw, and the draws leave the GL state they touch as they found it.
"""
import numpy as np
import pytest

pytest.importorskip("OpenGL")
from OpenGL import GL  # noqa: E402

from gltensor.bench.scenes import DRAWS, Cameras  # noqa: E402


def expected_pattern(n, w, h, step):
    """(N, H, W, 4) bottom-up: colour (r, 64, 37k mod 256, 255) with r = (step + k) mod 256, and
    (255 - r, 204, 26, 255) in the bottom-left w/2 x h/4 corner (at least 1 x 1)."""
    out = np.empty((n, h, w, 4), np.uint8)
    cw, ch = max(w // 2, 1), max(h // 4, 1)
    for k in range(n):
        r = (step + k) % 256
        out[k] = (r, 64, (37 * k) % 256, 255)
        out[k, :ch, :cw] = (255 - r, 204, 26, 255)
    return out


@pytest.fixture
def cameras(gl):
    made = []

    def make(*args, **kwargs):
        cams = Cameras(*args, **kwargs)
        made.append(cams)
        return cams

    yield make
    gl.make_current()
    for cams in made:
        cams.close()


@pytest.mark.parametrize("n,w,h", [(1, 1, 1), (1, 5, 3), (3, 16, 16), (5, 24, 8), (7, 33, 17)])
@pytest.mark.parametrize("step", [0, 200, 1000])
def test_pattern_gives_the_computed_picture(cameras, n, w, h, step):
    cams = cameras(n, w, h, draw="pattern")
    cams.draw_targets(step)
    cams.draw_atlas(step)
    exp = expected_pattern(n, w, h, step)
    np.testing.assert_array_equal(cams.reference(atlas=False, flip=False), exp)
    np.testing.assert_array_equal(cams.reference(atlas=True, flip=False), exp)


def test_pattern_differs_between_cameras_and_steps(cameras):
    cams = cameras(4, 12, 8, draw="pattern")
    cams.draw_targets(7)
    a = cams.reference(atlas=False, flip=False)
    cams.draw_targets(8)
    b = cams.reference(atlas=False, flip=False)
    for k in range(4):
        assert not np.array_equal(a[k], b[k])           # a stale frame shows
        for j in range(k):
            assert not np.array_equal(a[k], a[j])       # a swapped camera shows
        assert not np.array_equal(a[k], a[k, ::-1])     # a flip shows


@pytest.mark.parametrize("draw", sorted(DRAWS))
def test_atlas_tile_equals_the_cameras_texture(cameras, draw):
    cams = cameras(5, 20, 12, draw=draw)
    for step in (3, 4):
        cams.draw_targets(step)
        cams.draw_atlas(step)
        np.testing.assert_array_equal(cams.reference(atlas=True, flip=True), cams.reference(atlas=False, flip=True))


def test_pattern_leaves_program_and_vertex_array_unbound(cameras):
    cams = cameras(3, 8, 8, draw="pattern")
    cams.draw_targets(1)
    cams.draw_atlas(1)
    assert GL.glGetIntegerv(GL.GL_CURRENT_PROGRAM) == 0
    assert GL.glGetIntegerv(GL.GL_VERTEX_ARRAY_BINDING) == 0


def test_unknown_draw_is_refused(gl):
    with pytest.raises(ValueError, match="pattern"):
        Cameras(1, 4, 4, draw="raytraced")
