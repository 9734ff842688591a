/* The GL-side step before a read (gl_stage.c) and the once-per-driver check of its depth shader (depth_probe.c):
 * used by capture.c, and by the extension (_gltensor._depth_compute_exact, for the tests). */
#ifndef GLT_READ_GL_STAGE_H
#define GLT_READ_GL_STAGE_H

#include "convert/convert.h"

typedef struct glt_gl_stage glt_gl_stage;

/* ---- depth_probe.c: is the compute-shader depth path bit-equal to glReadPixels on this driver? ---- */
int glt_depth_compute_exact(const glt_gl *gl); /* once per GL renderer per process; needs a context current */
/* The depth path a stage of fmt should take (1: the compute shader): GLTENSOR_DEPTH_PATH when set, else the
 * shader for the CUDA backend where the probe found it exact. Asked by the stage's creator, so that gl_stage.c
 * takes the verdict instead of calling the probe (which itself builds stages). */
int glt_depth_use_compute(const glt_format *fmt, int for_cuda);

/* ---- gl_stage.c: GL-side work before reading (MSAA resolve, depth into a pixel-pack buffer) ---- */
int glt_stage_needed(const glt_format *fmt, GLenum target, int samples);
/* 1 where fmt's depth can go through the compute shader (fixed-point depth, GL 4.3 and compute entry points). */
int glt_stage_compute_possible(const glt_gl *gl, const glt_format *fmt);
/* width x height: the whole image; region: the part each run resolves and packs (NULL: the whole image).
 * A resolve writes the region at its own coordinates of a full-size renderbuffer; depth is packed as
 * region.height rows of region.width floats. use_compute: the depth path (glt_depth_use_compute's verdict;
 * ignored where the compute path cannot run). */
glt_status glt_stage_create(GLuint name, GLenum target, const glt_format *fmt, int width, int height, int samples,
                            const glt_rect *region, int use_compute, glt_gl_stage **out);
void glt_stage_destroy(glt_gl_stage *s); /* needs the context current */
glt_status glt_stage_run(glt_gl_stage *s);
GLuint glt_stage_resolved(const glt_gl_stage *s);    /* single-sample renderbuffer, or 0 */
GLuint glt_stage_depth_buffer(const glt_gl_stage *s); /* pixel-pack buffer of the region's float depth, or 0 */
/* CPU backend: the depth buffer's rows (flipped when asked), converted per mode, into dst. */
glt_status glt_stage_read_depth_host(glt_gl_stage *s, int flip, int mode, double near_plane, double far_plane,
                                     void *dst, size_t pitch);

#endif
