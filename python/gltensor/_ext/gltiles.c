/* The tile copy of gltensor.mujoco.BatchRenderer (see gltiles.h): the same GL calls _mujoco_tiles.TileSheet made
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
