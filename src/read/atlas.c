/*
 * Atlases: one texture holding a grid of equal tiles (one camera each), read
 * into (count, tile_height, tile_width, channels) with one map and one kernel
 * launch for the whole split. Tile 0 is the top-left tile as seen on screen;
 * glt_atlas_viewport tells renderers where to draw tile k. With a region on
 * the source, the grid is laid inside that rectangle (anchored at its top-left)
 * and only its pixels are read; viewports stay in whole-texture coordinates.
 */
#include "read/read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_atlas {
    glt_capture *cap;
    int rows, cols, tile_h, tile_w, count;
    glt_cuda_region *regions;
};

void glt_atlas_desc_init(glt_atlas_desc *d) {
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    glt_capture_desc_init(&d->source);
}

/* Derives the grid from the request and the image size; refuses grids that do not fit. */
static glt_status solve_grid(const glt_atlas_desc *d, int width, int height, unsigned name, glt_atlas *a) {
    /* the grid splits the source's region when it has one */
    const char *area = d->source.region.width || d->source.region.height ? "region" : "image";
    int rows = d->rows, cols = d->cols, th = d->tile_height, tw = d->tile_width;
    if (rows < 0 || cols < 0 || th < 0 || tw < 0 || d->count < 0 || (rows > 0) != (cols > 0) || (th > 0) != (tw > 0))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "atlas of texture %u: give tiles=(rows, cols), tile_size=(height, width), or both, with "
                        "positive numbers",
                        name);
    if (rows == 0 && th == 0)
        return glt_fail(GLT_INVALID_ARGUMENT, "atlas of texture %u: give tiles=(rows, cols) or tile_size=(height, "
                                              "width)",
                        name);
    if (th == 0) {
        if (height % rows || width % cols)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "atlas of texture %u: a %dx%d %s does not split into %d rows x %d cols of equal tiles; "
                            "pass tile_size=(height, width) as well",
                            name, width, height, area, rows, cols);
        th = height / rows;
        tw = width / cols;
    }
    if (rows == 0) {
        rows = height / th;
        cols = width / tw;
    }
    if (rows == 0 || cols == 0 || rows * th > height || cols * tw > width)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "atlas of texture %u: a grid of %d rows x %d cols of %dx%d tiles needs %dx%d pixels, but the "
                        "%s is %dx%d; make the texture (or region) larger or the grid smaller",
                        name, rows, cols, tw, th, cols * tw, rows * th, area, width, height);
    int count = d->count ? d->count : rows * cols;
    if (count > rows * cols)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "atlas of texture %u: %d tiles do not fit a grid of %d x %d; lower count or enlarge the grid",
                        name, count, rows, cols);
    a->rows = rows;
    a->cols = cols;
    a->tile_h = th;
    a->tile_w = tw;
    a->count = count;
    return GLT_OK;
}

glt_status glt_atlas_create(const glt_atlas_desc *desc, glt_atlas **out) {
    if (!desc || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_atlas_create: NULL argument");
    *out = NULL;
    GLT_CHECK_STRUCT_SIZE(desc, glt_atlas_desc);
    glt_atlas *a = calloc(1, sizeof *a);
    if (!a) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    glt_status st = glt_capture_create(&desc->source, &a->cap);
    if (st == GLT_OK && glt_capture_base(a->cap)->fmt->depth)
        st = glt_fail(GLT_UNSUPPORTED_FORMAT,
                      "texture %u is depth (%s); atlases split colour images, so read a depth atlas with a plain "
                      "Capture and slice it",
                      desc->source.gl_name, glt_capture_base(a->cap)->fmt->name);
    if (st == GLT_OK) {
        const glt_rect *rg = glt_capture_region(a->cap);
        st = solve_grid(desc, rg->width, rg->height, desc->source.gl_name, a);
    }
    if (st == GLT_OK) {
        a->regions = malloc(sizeof *a->regions * (size_t)a->count);
        if (!a->regions) st = glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    }
    if (st != GLT_OK) {
        glt_atlas_destroy(a);
        return st;
    }
    *out = a;
    return GLT_OK;
}

void glt_atlas_destroy(glt_atlas *a) {
    if (!a) return;
    glt_capture_destroy(a->cap);
    free(a->regions);
    free(a);
}

glt_capture *glt_atlas_capture(glt_atlas *a) { return a ? a->cap : NULL; }

void glt_atlas_grid(const glt_atlas *a, int *rows, int *cols, int *tile_height, int *tile_width, int *count) {
    if (rows) *rows = a->rows;
    if (cols) *cols = a->cols;
    if (tile_height) *tile_height = a->tile_h;
    if (tile_width) *tile_width = a->tile_w;
    if (count) *count = a->count;
}

/* Tile k's bottom-left corner relative to the region's: rows are counted from the region's top. */
static void tile_offset(const glt_atlas *a, int k, int *x0, int *y0) {
    *x0 = (k % a->cols) * a->tile_w;
    *y0 = glt_capture_region(a->cap)->height - (k / a->cols + 1) * a->tile_h;
}

/* Tile k's bottom-left corner in GL coordinates of the whole texture. */
static void tile_origin(const glt_atlas *a, int k, int *x0, int *y0) {
    tile_offset(a, k, x0, y0);
    *x0 += glt_capture_region(a->cap)->x;
    *y0 += glt_capture_region(a->cap)->y;
}

glt_status glt_atlas_viewport(const glt_atlas *a, int k, int viewport[4]) {
    if (!a || !viewport) return glt_fail(GLT_INVALID_ARGUMENT, "glt_atlas_viewport: NULL argument");
    if (k < 0 || k >= a->count)
        return glt_fail(GLT_INVALID_ARGUMENT, "tile %d is out of range: the atlas has %d tiles; pass an index in 0..%d", k, a->count,
                        a->count - 1);
    tile_origin(a, k, &viewport[0], &viewport[1]);
    viewport[2] = a->tile_w;
    viewport[3] = a->tile_h;
    return GLT_OK;
}

/* The read path's prepare step (read_path.c): the capture up to date, the grid still inside its region, one
 * (count, tile_h, tile_w, C) destination. */
static glt_status prepare_read(glt_atlas *a, glt_read_call *c) {
    if (!a) return glt_fail(GLT_INVALID_ARGUMENT, "an atlas read on a NULL atlas (a closed one?)");
    glt_status st = glt_capture_prepare(a->cap, &c->opts, &c->stream);
    if (st != GLT_OK) return st;
    const glt_object_base *o = glt_capture_base(a->cap);
    const glt_rect *rg = glt_capture_region(a->cap);
    if (a->rows * a->tile_h > rg->height || a->cols * a->tile_w > rg->width)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "texture %u was resized to %dx%d, whose %dx%d area read no longer holds the atlas grid of %d "
                        "x %d tiles of %dx%d; create a new Atlas for the new size",
                        o->name, o->width, o->height, rg->width, rg->height, a->rows, a->cols, a->tile_w, a->tile_h);
    snprintf(c->what, sizeof c->what, "the atlas of texture %u (%d tiles of %s)", o->name, a->count, o->fmt->name);
    c->fmt = o->fmt;
    c->pool = glt_capture_pool(a->cap);
    glt_dest_shape shape = {o->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, o->cuda_device, NULL,
                            a->count, a->tile_h, a->tile_w};
    c->shape = shape;
    return GLT_OK;
}

/* Tile k to base + k * image stride of the destination. */
static glt_status copy_tiles(void *obj, const glt_read_call *call, const glt_read_dest *d) {
    glt_atlas *a = obj;
    glt_capture *c = a->cap;
    const glt_object_base *o = glt_capture_base(c);
    const glt_out_spec *spec = &d->spec;
    char *base = d->data;
    size_t stride = d->strides.image, pitch = d->strides.pitch, plane = d->strides.plane;
    int flip = call->opts.flip;
    if (o->backend == GLT_BACKEND_CUDA) {
        glt_cuda_image *img = glt_capture_cuda_image(c);
        for (int k = 0; k < a->count; ++k) {
            glt_cuda_region r = {img, spec, 0, 0, a->tile_w, a->tile_h, base + (size_t)k * stride, pitch, plane};
            tile_origin(a, k, &r.x0, &r.y0);
            a->regions[k] = r;
        }
        void *ready = d->ready_event;
        glt_status st =
            glt_cuda_copy_regions(&img, 1, a->regions, a->count, flip, call->stream, &ready, ready ? 1 : 0);
        glt_capture_finish(c);
        return st;
    }
    /* CPU backend: one readback of the atlas's region, then each tile out of it. */
    const unsigned char *rows = NULL;
    glt_status st = glt_capture_read_scratch(c, &rows);
    if (st != GLT_OK) return st;
    ptrdiff_t full_row = (ptrdiff_t)glt_capture_row_bytes(c);
    size_t bpp = (size_t)o->fmt->channels * glt_dtype_size(o->fmt->dtype);
    for (int k = 0; k < a->count; ++k) {
        int x0, y0;
        tile_offset(a, k, &x0, &y0); /* the scratch holds the region alone */
        const unsigned char *first =
            rows + (ptrdiff_t)(y0 + (flip ? a->tile_h - 1 : 0)) * full_row + (ptrdiff_t)((size_t)x0 * bpp);
        char *dst = base + (size_t)k * stride;
        if (spec->raw) { /* as stored: whole tile rows */
            for (int y = 0; y < a->tile_h; ++y)
                memcpy(dst + (size_t)y * pitch, first + (flip ? -full_row : full_row) * y, (size_t)a->tile_w * bpp);
        } else {
            glt_convert_host(o->fmt, spec, first, flip ? -full_row : full_row, a->tile_w, a->tile_h, dst, pitch,
                             plane);
        }
    }
    return GLT_OK;
}

glt_status glt_atlas_read(glt_atlas *a, const glt_read_options *opts, glt_frame **out) {
    glt_read_call c;
    glt_status st = glt_read_begin_frame(&c, "glt_atlas_read", opts, out);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(a, &c) : st, copy_tiles, a);
}

glt_status glt_atlas_read_into(glt_atlas *a, const glt_read_options *opts, const glt_buffer_view *dst) {
    glt_read_call c;
    glt_status st = glt_read_begin_into(&c, "glt_atlas_read_into", opts, dst);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(a, &c) : st, copy_tiles, a);
}
