/* The tile copy of gltensor.mujoco.BatchRenderer (see gltiles.h): the same GL calls gltensor.mujoco._tiles.TileSheet made
 * through PyOpenGL, through the core's GL entry points, with one error check at the end. */
#include "gltiles.h"

#include "internal.h"

#define GL_SCISSOR_TEST_ 0x0C11
#define GL_READ_FRAMEBUFFER_ 0x8CA8
#define GL_DRAW_FRAMEBUFFER_ 0x8CA9
#define GL_FRAMEBUFFER_ 0x8D40
#define GL_COLOR_BUFFER_BIT_ 0x00004000
#define GL_DEPTH_BUFFER_BIT_ 0x00000100
#define GL_NEAREST_ 0x2600

static gltensor_state *state_of(PyObject *module) { return (gltensor_state *)PyModule_GetState(module); }

PyObject *glt_py_copy_tile(PyObject *module, PyObject *args) {
    unsigned src = 0, dst = 0;
    int width = 0, height = 0, x = 0, y = 0, depth = 0;
    if (!PyArg_ParseTuple(args, "IIiiiip:_copy_tile", &src, &dst, &width, &height, &x, &y, &depth)) return NULL;
    if (width <= 0 || height <= 0 || x < 0 || y < 0) {
        PyErr_Format(PyExc_ValueError, "_copy_tile: a %dx%d tile at (%d, %d) is not a tile", width, height, x, y);
        return NULL;
    }
    const glt_gl *gl = glt_gl_load();
    if (!gl) return glt_py_raise(state_of(module), GLT_GL_ERROR);
    if (!glt_current_gl_handles().context) { /* the raw handles: no registry entry, no marker in MuJoCo's context */
        PyErr_SetString(PyExc_RuntimeError, "_copy_tile: no GL context is current in this thread");
        return NULL;
    }
    /* An error MuJoCo's own calls left pending (mjr_render checks none; seen once on an H200 beside other tests)
     * must not be blamed on this copy; MuJoCo's Renderer ignores such errors too. */
    glt_gl_drain_errors(gl);
    gl->Disable(GL_SCISSOR_TEST_); /* mjr_render's clear switches it on and off; a scissor would clip the copy */
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER_, src);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER_, dst);
    gl->BlitFramebuffer(0, 0, width, height, x, y, x + width, y + height,
                        depth ? GL_DEPTH_BUFFER_BIT_ : GL_COLOR_BUFFER_BIT_, GL_NEAREST_);
    gl->BindFramebuffer(GL_FRAMEBUFFER_, src); /* mjr_render draws into what is bound */
    GLenum err = gl->GetError();
    if (err != 0) {
        glt_gl_drain_errors(gl);
        glt_fail(GLT_GL_ERROR,
                 "BatchRenderer: copying a %dx%d tile from framebuffer %u to (%d, %d) of framebuffer %u failed with GL "
                 "error 0x%04x; were the renderer's framebuffers deleted (close it and make a new one)?",
                 width, height, src, x, y, dst, (unsigned)err);
        return glt_py_raise(state_of(module), GLT_GL_ERROR);
    }
    Py_RETURN_NONE;
}

/* Several tiles in one call: tile j is (0, 0, width, height) of framebuffer srcs[j], copied to (xs[j], ys[j]) of dst,
 * with the draw framebuffer bound once for all of them; then `rebind` is bound as GL_FRAMEBUFFER. For a batch drawn
 * into several MjrContexts in turn (one offscreen buffer each), so that the resolves of a group run back to back
 * instead of between the draws. */
PyObject *glt_py_copy_tiles(PyObject *module, PyObject *args) {
    PyObject *srcs, *xs, *ys;
    unsigned dst = 0, rebind = 0;
    int width = 0, height = 0, depth = 0;
    if (!PyArg_ParseTuple(args, "OIiiOOpI:_copy_tiles", &srcs, &dst, &width, &height, &xs, &ys, &depth, &rebind))
        return NULL;
    Py_ssize_t n = PySequence_Size(srcs);
    if (n < 0) return NULL;
    if (PySequence_Size(xs) != n || PySequence_Size(ys) != n || width <= 0 || height <= 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "_copy_tiles: %zd sources need as many x and y, and a positive size", n);
        return NULL;
    }
    const glt_gl *gl = glt_gl_load();
    if (!gl) return glt_py_raise(state_of(module), GLT_GL_ERROR);
    if (!glt_current_gl_handles().context) {
        PyErr_SetString(PyExc_RuntimeError, "_copy_tiles: no GL context is current in this thread");
        return NULL;
    }
    glt_gl_drain_errors(gl);
    gl->Disable(GL_SCISSOR_TEST_);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER_, dst);
    unsigned bound_read = 0;
    for (Py_ssize_t j = 0; j < n; ++j) {
        PyObject *s = PySequence_GetItem(srcs, j), *x = PySequence_GetItem(xs, j), *y = PySequence_GetItem(ys, j);
        long src = s ? PyLong_AsLong(s) : -1, xj = x ? PyLong_AsLong(x) : -1, yj = y ? PyLong_AsLong(y) : -1;
        Py_XDECREF(s);
        Py_XDECREF(x);
        Py_XDECREF(y);
        if (PyErr_Occurred()) return NULL;
        if (src <= 0 || xj < 0 || yj < 0) {
            PyErr_Format(PyExc_ValueError, "_copy_tiles: tile %zd has framebuffer %ld at (%ld, %ld)", j, src, xj, yj);
            return NULL;
        }
        if ((unsigned)src != bound_read) {
            gl->BindFramebuffer(GL_READ_FRAMEBUFFER_, (unsigned)src);
            bound_read = (unsigned)src;
        }
        gl->BlitFramebuffer(0, 0, width, height, (int)xj, (int)yj, (int)xj + width, (int)yj + height,
                            depth ? GL_DEPTH_BUFFER_BIT_ : GL_COLOR_BUFFER_BIT_, GL_NEAREST_);
    }
    gl->BindFramebuffer(GL_FRAMEBUFFER_, rebind);
    GLenum err = gl->GetError();
    if (err != 0) {
        glt_gl_drain_errors(gl);
        glt_fail(GLT_GL_ERROR, "BatchRenderer: copying %zd %dx%d tiles into framebuffer %u failed with GL error 0x%04x; "
                 "were the renderer's framebuffers deleted (close it and make a new one)?", n, width, height, dst,
                 (unsigned)err);
        return glt_py_raise(state_of(module), GLT_GL_ERROR);
    }
    Py_RETURN_NONE;
}

/* The sample copy (GL 4.3 glCopyImageSubData): (0, 0, width, height) of renderbuffer src, every sample as it is, to
 * (x, y) of renderbuffer dst, which has src's format and sample count. No framebuffer is bound, so mjr_render's
 * offscreen framebuffer stays bound for the next env; the tiles are resolved later, all in one blit (_copy_tiles).
 * Why: a resolve blit per env binds two framebuffers and back between two draws, and on an H100 host those
 * switches and blits took 14 of a tile's 46 µs (benchmarks/results/mujoco_tile_profile_h100.json). */
PyObject *glt_py_copy_samples(PyObject *module, PyObject *args) {
    unsigned src = 0, dst = 0;
    int width = 0, height = 0, x = 0, y = 0;
    if (!PyArg_ParseTuple(args, "IIiiii:_copy_samples", &src, &dst, &width, &height, &x, &y)) return NULL;
    if (width <= 0 || height <= 0 || x < 0 || y < 0 || !src || !dst) {
        PyErr_Format(PyExc_ValueError, "_copy_samples: a %dx%d tile at (%d, %d) from renderbuffer %u to %u is not a tile",
                     width, height, x, y, src, dst);
        return NULL;
    }
    const glt_gl *gl = glt_gl_load();
    if (!gl) return glt_py_raise(state_of(module), GLT_GL_ERROR);
    if (!gl->CopyImageSubData) {
        PyErr_SetString(PyExc_RuntimeError, "_copy_samples: this GL has no glCopyImageSubData (GL 4.3 / ARB_copy_image)");
        return NULL;
    }
    if (!glt_current_gl_handles().context) {
        PyErr_SetString(PyExc_RuntimeError, "_copy_samples: no GL context is current in this thread");
        return NULL;
    }
    glt_gl_drain_errors(gl); /* as _copy_tile: an error MuJoCo's calls left pending is not this copy's */
    gl->CopyImageSubData(src, GL_RENDERBUFFER, 0, 0, 0, 0, dst, GL_RENDERBUFFER, 0, x, y, 0, width, height, 1);
    GLenum err = gl->GetError();
    if (err != 0) {
        glt_gl_drain_errors(gl);
        glt_fail(GLT_GL_ERROR,
                 "BatchRenderer: copying the samples of a %dx%d tile from renderbuffer %u to (%d, %d) of renderbuffer "
                 "%u failed with GL error 0x%04x; were the renderer's renderbuffers deleted (close it and make a new "
                 "one)?", width, height, src, x, y, dst, (unsigned)err);
        return glt_py_raise(state_of(module), GLT_GL_ERROR);
    }
    Py_RETURN_NONE;
}
