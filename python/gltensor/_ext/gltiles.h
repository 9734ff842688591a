/* gltiles.c: the per-env tile copy of gltensor.mujoco.BatchRenderer, in C: it runs once per environment per
 * frame, and five PyOpenGL calls (each followed by PyOpenGL's glGetError) cost ~30 µs a tile on an H200 host,
 * a third of a tile's whole render there. */
#ifndef GLT_PY_GLTILES_H
#define GLT_PY_GLTILES_H

#include "ext.h"

PyObject *glt_py_copy_tile(PyObject *module, PyObject *args);
PyObject *glt_py_copy_tiles(PyObject *module, PyObject *args);
PyObject *glt_py_copy_samples(PyObject *module, PyObject *args);

#define GLT_PY_GLTILES_METHODS                                                                                     \
    {"_copy_tile", glt_py_copy_tile, METH_VARARGS,                                                                  \
     "Private, for gltensor.mujoco.BatchRenderer: _copy_tile(src_fbo, dst_fbo, width, height, x, y, depth) copies "  \
     "(0, 0, width, height) of framebuffer src_fbo (resolving its samples, GL_NEAREST) to (x, y) of dst_fbo in the " \
     "current GL context, scissor test off, then binds src_fbo as GL_FRAMEBUFFER; raises GLError on a GL error."},     \
    {"_copy_tiles", glt_py_copy_tiles, METH_VARARGS,                                                                \
     "Private, for gltensor.mujoco.BatchRenderer: _copy_tiles(src_fbos, dst_fbo, width, height, xs, ys, depth, "    \
     "rebind) copies (0, 0, width, height) of each src_fbos[j] to (xs[j], ys[j]) of dst_fbo, the draw framebuffer "   \
     "bound once, then binds rebind as GL_FRAMEBUFFER; raises GLError on a GL error."},                          \
    {"_copy_samples", glt_py_copy_samples, METH_VARARGS,                                                            \
     "Private, for gltensor.mujoco.BatchRenderer: _copy_samples(src_rb, dst_rb, width, height, x, y) copies every "  \
     "sample of (0, 0, width, height) of renderbuffer src_rb to (x, y) of renderbuffer dst_rb (glCopyImageSubData), "  \
     "binding no framebuffer; raises GLError on a GL error, RuntimeError without glCopyImageSubData."},

#endif
