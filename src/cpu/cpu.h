/* The CPU backend (cpu/README.md): a GL image read back into host memory, for contexts CUDA cannot serve. */
#ifndef GLT_CPU_H
#define GLT_CPU_H

#include "gl/gl.h"

/* ---- cpu_backend.c ---- */
typedef struct glt_cpu_reader glt_cpu_reader;
glt_status glt_cpu_reader_create(GLuint name, GLenum target, glt_cpu_reader **out);
void glt_cpu_reader_destroy(glt_cpu_reader *r); /* needs the context current to free GL objects */
/* Reads `rect` of a width x height image (only those pixels) into dst, top row first when flip. */
glt_status glt_cpu_reader_read(glt_cpu_reader *r, const glt_format *fmt, int width, int height, const glt_rect *rect,
                               void *dst, size_t dst_pitch, int flip);

#endif
