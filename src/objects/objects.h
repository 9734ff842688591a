/* What every object over one GL object shares (objects/README.md): its context, what GL says of it, the format its
 * kind accepts and the backend that serves it. */
#ifndef GLT_OBJECTS_H
#define GLT_OBJECTS_H

#include "gl/gl.h"

/* ---- object_base.c: the prelude of every object over one GL object (capture, upload, buffer) ---- */
typedef enum glt_object_kind {
    GLT_OBJECT_CAPTURE, /* a texture or renderbuffer read (capture.c): the capturable formats */
    GLT_OBJECT_UPLOAD,  /* a texture written (upload.c): the writable formats */
    GLT_OBJECT_BUFFER,  /* a buffer object (buffer.c): no format */
} glt_object_kind;

/* What GL says of the object now. */
typedef struct glt_object_state {
    int width, height, samples; /* images */
    GLenum internal_format;
    const glt_format *fmt;      /* images: the format the object's kind accepts */
    size_t size;                /* buffers */
    int gl_mapped;              /* buffers: mapped by GL itself */
} glt_object_state;

/* The first member of glt_capture, glt_upload and glt_buffer. */
typedef struct glt_object_base {
    glt_gl_context_id gl_context; /* the context current at creation: every entry checks it */
    glt_object_kind kind;
    GLuint name;
    GLenum target; /* images */
    glt_backend backend;
    char backend_reason[320];
    int cuda_device;
    GLenum internal_format; /* images, as last queried (adopted) */
    const glt_format *fmt;
    int width, height, samples;
} glt_object_base;

/* Creation: GLTENSOR_* checked, the current context recorded (refused when there is none), the object queried
 * from GL and its format refused as its kind refuses it; *now and o hold what GL said. */
glt_status glt_object_open(glt_object_base *o, glt_object_kind kind, GLuint name, GLenum target,
                           glt_object_state *now);
/* Every later use: the object's context is current, and what GL says of the object now (its format looked up
 * again only when the internal format changed). Changes nothing in o. */
glt_status glt_object_query(const glt_object_base *o, glt_object_state *now);
void glt_object_adopt(glt_object_base *o, const glt_object_state *now);
int glt_object_same(const glt_object_base *o, const glt_object_state *now); /* same size, format and samples */
/* The backend (backend_choice.c) into o's backend, cuda_device and backend_reason. */
glt_status glt_object_choose_backend(glt_object_base *o, glt_backend requested, int requested_device);
const char *glt_object_kind_name(const glt_object_base *o); /* "texture", "renderbuffer" or "buffer" */

/* An image's size, format (refused as a capture refuses it) and sample count; its bindings restored. */
glt_status glt_gl_image_query(const glt_gl *gl, GLuint name, GLenum target, int *width, int *height,
                              const glt_format **fmt, int *samples);
/* GLT_OK when r is all zero (the whole image) or a rectangle inside a width x height image. */
glt_status glt_gl_region_check(const glt_rect *r, GLenum target, GLuint name, int width, int height);
/* How `r` fails to lie inside a width x height image (written into why), or NULL when it fits. */
const char *glt_region_misfit(const glt_rect *r, int width, int height, char *why, size_t n);

/* object_base.c: how a texture's format is written (GLT_DST_*, convert/pixel_codes.h), or -1 when it cannot be. */
int glt_write_dst_type(const glt_format *fmt);

#endif
