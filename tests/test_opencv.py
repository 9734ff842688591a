"""OpenCV: frames read with channels='bgr' (or 'bgra') are OpenCV's own pixel order, top row first, so they go
into cv2 as they are (CPU backend, opencv-python-headless); on the CUDA backend a cv2.cuda.GpuMat wraps a frame's
memory with its pointer and row pitch, no copy (where OpenCV is built with CUDA: skipped elsewhere)."""

import numpy as np
import pytest

import gltensor

cv2 = pytest.importorskip("cv2")
GL = pytest.importorskip("OpenGL.GL")

W, H = 61, 37  # odd sizes: rows of 3-channel bytes are not 4-byte multiples


def scene():
    """An upright test image, RGBA: random pixels under a red top half and a blue left third, so that a flipped
    or channel-swapped frame differs from it everywhere, not in one corner."""
    img = np.random.default_rng(7).integers(0, 256, (H, W, 4), dtype=np.uint8)
    img[: H // 2, :, 0] = 255
    img[:, : W // 3, 2] = 255
    img[..., 3] = 255
    return img


@pytest.fixture
def texture(gl):
    """A GL RGBA8 texture holding scene() (row 0 of the array at the top)."""
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, W, H)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    rgba = scene()
    gltensor.upload(tex, rgba, backend="cpu")
    yield tex, rgba
    gl.make_current()
    GL.glDeleteTextures(1, [tex])


def test_bgr_frames_go_into_cv2_as_they_are(texture):
    tex, rgba = texture
    with gltensor.Capture(tex, backend="cpu") as cap:
        bgr = np.asarray(cap.read(channels="bgr"))
        bgra = np.asarray(cap.read(channels="bgra"))
    assert bgr.shape == (H, W, 3) and bgr.dtype == np.uint8
    np.testing.assert_array_equal(bgr, rgba[..., 2::-1])  # the whole image: BGR, top row first
    # OpenCV reads it as BGR: its own conversions give back the source image.
    np.testing.assert_array_equal(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), rgba[..., :3])
    np.testing.assert_array_equal(cv2.cvtColor(bgra, cv2.COLOR_BGRA2RGBA), rgba)
    np.testing.assert_array_equal(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY),
                                  cv2.cvtColor(np.ascontiguousarray(rgba[..., :3]), cv2.COLOR_RGB2GRAY))
    # A PNG written by OpenCV decodes (here, and by any viewer) to the upright image in RGB order.
    ok, png = cv2.imencode(".png", bgr)
    assert ok
    np.testing.assert_array_equal(cv2.imdecode(png, cv2.IMREAD_COLOR), bgr)
    from PIL import Image
    import io
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png.tobytes())).convert("RGB")), rgba[..., :3])


def opencv_cuda_devices():
    cuda = getattr(cv2, "cuda", None)
    try:
        return cuda.getCudaEnabledDeviceCount() if cuda is not None else 0
    except cv2.error:
        return 0


@pytest.mark.gpu
@pytest.mark.skipif(opencv_cuda_devices() == 0, reason="this OpenCV has no CUDA (cv2.cuda absent or "
                    "getCudaEnabledDeviceCount() == 0); opencv-python-headless from PyPI is built without it")
def test_cuda_frame_as_a_gpumat_without_copy(ctx, texture):
    tex, rgba = texture
    with gltensor.Capture(tex, backend="cuda") as cap:
        frame = cap.read(channels="bgra")  # 4 channels: CV_8UC4
        frame.synchronize()  # OpenCV's own stream work is not ordered after gltensor's copy otherwise
        h, w, c = frame.shape
        pitch = frame.strides[0]
        mat = cv2.cuda.createGpuMatFromCudaMemory(h, w, cv2.CV_8UC4, frame.data_ptr, pitch)
        assert mat.cudaPtr() == frame.data_ptr and mat.step == pitch and mat.size() == (w, h)
        np.testing.assert_array_equal(mat.download(), rgba[..., [2, 1, 0, 3]])
        # An OpenCV CUDA operation on it reads the frame in place.
        gray = cv2.cuda.cvtColor(mat, cv2.COLOR_BGRA2GRAY).download()
        ref = cv2.cvtColor(rgba, cv2.COLOR_RGBA2GRAY).astype(int)
        assert np.abs(gray.astype(int) - ref).max() <= 1  # the whole image; CUDA and CPU round alike or by 1
        del mat  # the GpuMat borrows the frame's memory: it must not outlive the frame
