"""One spelling per meaning across the binding (issue #25), and the old spellings that keep working for one release
with a DeprecationWarning: both are tested here, on the CPU backend (the parsing is the same on CUDA)."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from glhelpers import to_numpy

pytestmark = pytest.mark.usefixtures("gl")


def _no_warning(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def test_read_stream_and_out_are_keywords(make_texture):
    img = make_texture("RGBA8", 8, 5)
    with gltensor.Capture(img.name, backend="cpu") as cap:
        out = np.zeros((5, 8, 4), np.uint8)
        assert _no_warning(lambda: cap.read(False, stream=None, out=out)) is out
        assert_array_equal(out, img.data)
        assert_array_equal(to_numpy(_no_warning(lambda: cap.read(False))), img.data)
        out[:] = 0
        with pytest.warns(DeprecationWarning) as record:
            assert cap.read(False, None, out) is out  # the old positional spelling still works
        assert ["stream=" in str(w.message) for w in record] == [True, False]
        assert "pass out= as a keyword" in str(record[1].message)
        assert_array_equal(out, img.data)
        with pytest.warns(DeprecationWarning, match="pass stream= as a keyword"):
            cap.read(True, None)
        with pytest.raises(TypeError, match="at most 3 positional"):
            cap.read(True, None, None, 1)


def test_batch_read_list_stream_is_a_keyword(make_texture):
    img = make_texture("RGBA8", 4, 4)
    with gltensor.Batch([img.name], backend="cpu") as batch:
        assert len(_no_warning(lambda: batch.read_list(True, stream=None))) == 1
        with pytest.warns(DeprecationWarning, match="pass stream= as a keyword"):
            batch.read_list(True, None)


@pytest.mark.parametrize("kind", ["batch", "atlas", "capture"])
def test_every_read_takes_depth_options(kind, make_texture):
    """Batch.read and Atlas.read take depth= as Capture.read does (the stubs lacked it): a colour image refuses
    the depth conversion itself, not the keyword."""
    img = make_texture("RGBA8", 8, 4)
    obj = {"batch": lambda: gltensor.Batch([img.name], backend="cpu"),
           "atlas": lambda: gltensor.Atlas(img.name, tiles=(1, 2), backend="cpu"),
           "capture": lambda: gltensor.Capture(img.name, backend="cpu")}[kind]()
    with obj:
        assert obj.read(depth="window") is not None  # the default, asked for by name
        with pytest.raises(gltensor.GLTensorError):
            obj.read(depth="linear", near=0.1, far=10.0)


def test_upload_first_argument_is_name(make_texture):
    img = make_texture("RGBA8", 4, 3)
    _no_warning(lambda: gltensor.Upload(name=img.name, backend="cpu").close())
    with pytest.warns(DeprecationWarning, match="texture= is deprecated"):
        up = gltensor.Upload(texture=img.name, backend="cpu")
    assert up.name == img.name
    up.close()
    with pytest.raises(TypeError, match="multiple values"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            gltensor.Upload(img.name, texture=img.name)


@pytest.mark.parametrize("layout", ["hwc", "HWC", "chw", "CHW"])
def test_write_layout_in_either_case(layout, make_texture):
    img = make_texture("RGBA8", 4, 3)
    src = np.arange(3 * 4 * 4, dtype=np.uint8).reshape(3, 4, 4)
    x = src if layout.lower() == "hwc" else np.ascontiguousarray(src.transpose(2, 0, 1))
    with gltensor.Upload(img.name, backend="cpu") as up, gltensor.Capture(img.name, backend="cpu") as cap:
        _no_warning(lambda: up.write(x, layout=layout))
        assert_array_equal(to_numpy(cap.read(layout=layout.swapcase())), x)  # the other case, the same layout


def test_write_stream_is_a_keyword(make_texture):
    img = make_texture("RGBA8", 4, 3)
    x = np.zeros((3, 4, 4), np.uint8)
    with gltensor.Upload(img.name, backend="cpu") as up:
        _no_warning(lambda: up.write(x, True, stream=None))
        with pytest.warns(DeprecationWarning, match="pass stream= as a keyword"):
            up.write(x, True, None)


def test_atlas_image_size_and_the_old_size(make_texture):
    img = make_texture("RGBA8", 30, 19)
    with gltensor.Atlas(img.name, tile_size=(5, 7), backend="cpu") as atlas:
        assert _no_warning(lambda: atlas.image_size) == (30, 19)
        with pytest.warns(DeprecationWarning, match="image_size"):
            assert atlas.size == (30, 19)


def test_atlas_region_is_settable_like_the_captures(make_texture):
    img = make_texture("RGBA8", 30, 20)
    with gltensor.Atlas(img.name, tiles=(2, 2), region=(0, 0, 20, 10), backend="cpu") as atlas:
        tiles_before = to_numpy(atlas.read(flip=False))
        atlas.region = (10, 10, 20, 10)  # the same size: the grid moves
        assert atlas.region == (10, 10, 20, 10)
        assert atlas.viewport(0)[:2] == (10, 15)
        moved = to_numpy(atlas.read(flip=False))
        # tile 0 is the top-left one as seen on screen: rows 15..19, columns 10..19 of the texture (bottom-up)
        assert_array_equal(moved[0], img.data[15:20, 10:20])
        assert not np.array_equal(moved, tiles_before)
        with pytest.raises(ValueError, match="not resize"):
            atlas.region = (0, 0, 10, 10)
        with pytest.raises(ValueError, match="not resize"):
            atlas.region = None  # the whole 30x20 texture is another size
        assert atlas.region == (10, 10, 20, 10)


def test_capture_target_reads_back_as_it_is_given(make_texture):
    img = make_texture("RGBA8", 4, 4, target=GL.GL_TEXTURE_RECTANGLE)
    with gltensor.Capture(img.name, gltensor.GL_TEXTURE_RECTANGLE, backend="cpu") as by_enum:
        assert by_enum.target == "GL_TEXTURE_RECTANGLE" and by_enum.gl_target == gltensor.GL_TEXTURE_RECTANGLE
        with gltensor.Capture(img.name, by_enum.target, backend="cpu") as by_name:  # the name round-trips
            assert by_name.gl_target == gltensor.GL_TEXTURE_RECTANGLE
            assert_array_equal(to_numpy(by_name.read()), to_numpy(by_enum.read()))
    with pytest.raises(ValueError, match="target must be"):
        gltensor.Capture(img.name, "GL_TEXTURE_3D")
