/*
 * Atlases: one texture holding a grid of equal tiles (one camera each), read
 * into (count, tile_height, tile_width, channels) with one map and one kernel
 * launch for the whole split. Tile 0 is the top-left tile as seen on screen;
 * glt_atlas_viewport tells renderers where to draw tile k. With a region on
 * the source, the grid is laid inside that rectangle (anchored at its top-left)
 * and only its pixels are read; viewports stay in whole-texture coordinates.
 */
#include "internal.h"

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
    if (st == GLT_OK && a->cap->fmt->depth)
        st = glt_fail(GLT_UNSUPPORTED_FORMAT,
                      "texture %u is depth (%s); atlases split colour images, so read a depth atlas with a plain "
                      "Capture and slice it",
                      desc->source.gl_name, a->cap->fmt->name);
    if (st == GLT_OK) st = solve_grid(desc, a->cap->region.width, a->cap->region.height, desc->source.gl_name, a);
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
    *y0 = a->cap->region.height - (k / a->cols + 1) * a->tile_h;
}

/* Tile k's bottom-left corner in GL coordinates of the whole texture. */
static void tile_origin(const glt_atlas *a, int k, int *x0, int *y0) {
    tile_offset(a, k, x0, y0);
    *x0 += a->cap->region.x;
    *y0 += a->cap->region.y;
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

static glt_status prepare(glt_atlas *a, const glt_read_options *opts, void **stream) {
    glt_status st = glt_capture_prepare(a->cap, opts, stream);
    if (st != GLT_OK) return st;
    const glt_rect *rg = &a->cap->region;
    if (a->rows * a->tile_h > rg->height || a->cols * a->tile_w > rg->width)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "texture %u was resized to %dx%d, whose %dx%d area read no longer holds the atlas grid of %d "
                        "x %d tiles of %dx%d; create a new Atlas for the new size",
                        a->cap->name, a->cap->width, a->cap->height, rg->width, rg->height, a->rows, a->cols,
                        a->tile_w, a->tile_h);
    return GLT_OK;
}

static glt_status copy_tiles(glt_atlas *a, const glt_out_spec *spec, char *base, size_t stride, size_t pitch,
                             size_t plane, int flip, void *stream, void *ready) {
    glt_capture *c = a->cap;
    if (c->backend == GLT_BACKEND_CUDA) {
        for (int k = 0; k < a->count; ++k) {
            glt_cuda_region r = {c->cuda, spec, 0, 0, a->tile_w, a->tile_h, base + (size_t)k * stride, pitch, plane};
            tile_origin(a, k, &r.x0, &r.y0);
            a->regions[k] = r;
        }
        glt_status st = glt_cuda_copy_regions(&c->cuda, 1, a->regions, a->count, flip, stream, &ready, ready ? 1 : 0);
        glt_capture_finish(c);
        return st;
    }
    /* CPU backend: one readback of the atlas's region, then each tile out of it. */
    glt_status st = glt_capture_read_scratch(c);
    if (st != GLT_OK) return st;
    ptrdiff_t full_row = (ptrdiff_t)glt_capture_row_bytes(c);
    size_t bpp = (size_t)c->fmt->channels * glt_dtype_size(c->fmt->dtype);
    for (int k = 0; k < a->count; ++k) {
        int x0, y0;
        tile_offset(a, k, &x0, &y0); /* the scratch holds the region alone */
        const unsigned char *first = c->scratch + (ptrdiff_t)(y0 + (flip ? a->tile_h - 1 : 0)) * full_row +
                                     (ptrdiff_t)((size_t)x0 * bpp);
        char *dst = base + (size_t)k * stride;
        if (spec->raw) { /* as stored: whole tile rows */
            for (int y = 0; y < a->tile_h; ++y)
                memcpy(dst + (size_t)y * pitch, first + (flip ? -full_row : full_row) * y, (size_t)a->tile_w * bpp);
        } else {
            glt_convert_host(c->fmt, spec, first, flip ? -full_row : full_row, a->tile_w, a->tile_h, dst, pitch,
                             plane);
        }
    }
    return GLT_OK;
}

static void describe(const glt_atlas *a, char *what, size_t n) {
    snprintf(what, n, "the atlas of texture %u (%d tiles of %s)", a->cap->name, a->count, a->cap->fmt->name);
}

/* A read of all tiles into a new frame (view NULL, *out set) or into the caller's view. */
static glt_status read_to(glt_atlas *a, const glt_read_options *opts_in, const glt_buffer_view *view,
                          glt_frame **out) {
    glt_read_options opts; GLT_OPTIONS_IN(read, opts_in, &opts, "glt_atlas_read");
    void *stream = NULL;
    glt_status st = prepare(a, &opts, &stream);
    if (st != GLT_OK) return st;
    glt_capture *c = a->cap;
    char what[96];
    describe(a, what, sizeof what);
    glt_dest_shape shape = {c->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, c->cuda_device, NULL,
                            a->count, a->tile_h, a->tile_w};
    glt_read_dest d;
    st = glt_read_dest_open(c->fmt, &opts, what, c->pool, stream, &shape, view, &d);
    if (st != GLT_OK) return st;
    st = copy_tiles(a, &d.spec, d.data, d.strides.image, d.strides.pitch, d.strides.plane, opts.flip, stream,
                    d.ready_event);
    return glt_read_dest_close(&d, st, out);
}

glt_status glt_atlas_read(glt_atlas *a, const glt_read_options *opts_in, glt_frame **out) {
    if (!a || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_atlas_read: NULL argument");
    *out = NULL;
    return read_to(a, opts_in, NULL, out);
}

glt_status glt_atlas_read_into(glt_atlas *a, const glt_read_options *opts_in, const glt_buffer_view *dst) {
    if (!a || !dst) return glt_fail(GLT_INVALID_ARGUMENT, "glt_atlas_read_into: atlas and dst must not be NULL");
    return read_to(a, opts_in, dst, NULL);
}
