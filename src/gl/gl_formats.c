/*
 * The GL internal formats gltensor captures, what each becomes (dtype, channels),
 * how the CPU backend reads it back, and names for error messages.
 */
#include "gl/gl.h"

#include <stdio.h>

#define F(fmt, name, dtype, ch, rf, rt) {fmt, name, GLT_DTYPE_##dtype, ch, rf, rt, 0}
/* Depth images: read through GL as float window depth (CUDA cannot map them), one channel. */
#define D(fmt, name) {fmt, name, GLT_DTYPE_FLOAT32, 1, GL_DEPTH_COMPONENT, GL_FLOAT, 1}

static const glt_format formats[] = {
    F(0x8058, "GL_RGBA8", UINT8, 4, GL_RGBA, GL_UNSIGNED_BYTE),
    F(0x8051, "GL_RGB8", UINT8, 3, GL_RGB, GL_UNSIGNED_BYTE),
    /* Unsized formats: GL picks 8 bits per channel for these on every driver we know. */
    F(0x1908, "GL_RGBA8", UINT8, 4, GL_RGBA, GL_UNSIGNED_BYTE), /* GL_RGBA */
    F(0x1907, "GL_RGB8", UINT8, 3, GL_RGB, GL_UNSIGNED_BYTE),   /* GL_RGB */
    /* sRGB formats come back as the stored (encoded) bytes, as CUDA sees them. */
    F(0x8C43, "GL_SRGB8_ALPHA8", UINT8, 4, GL_RGBA, GL_UNSIGNED_BYTE),
    F(0x8229, "GL_R8", UINT8, 1, GL_RED, GL_UNSIGNED_BYTE),
    F(0x822B, "GL_RG8", UINT8, 2, GL_RG, GL_UNSIGNED_BYTE),
    F(0x822A, "GL_R16", UINT16, 1, GL_RED, GL_UNSIGNED_SHORT),
    F(0x822C, "GL_RG16", UINT16, 2, GL_RG, GL_UNSIGNED_SHORT),
    F(0x805B, "GL_RGBA16", UINT16, 4, GL_RGBA, GL_UNSIGNED_SHORT),
    F(0x822D, "GL_R16F", FLOAT16, 1, GL_RED, GL_HALF_FLOAT),
    F(0x822F, "GL_RG16F", FLOAT16, 2, GL_RG, GL_HALF_FLOAT),
    F(0x881A, "GL_RGBA16F", FLOAT16, 4, GL_RGBA, GL_HALF_FLOAT),
    F(0x822E, "GL_R32F", FLOAT32, 1, GL_RED, GL_FLOAT),
    F(0x8230, "GL_RG32F", FLOAT32, 2, GL_RG, GL_FLOAT),
    F(0x8814, "GL_RGBA32F", FLOAT32, 4, GL_RGBA, GL_FLOAT),
    F(0x8232, "GL_R8UI", UINT8, 1, GL_RED_INTEGER, GL_UNSIGNED_BYTE),
    F(0x8238, "GL_RG8UI", UINT8, 2, GL_RG_INTEGER, GL_UNSIGNED_BYTE),
    F(0x8D7C, "GL_RGBA8UI", UINT8, 4, GL_RGBA_INTEGER, GL_UNSIGNED_BYTE),
    F(0x8234, "GL_R16UI", UINT16, 1, GL_RED_INTEGER, GL_UNSIGNED_SHORT),
    F(0x8D76, "GL_RGBA16UI", UINT16, 4, GL_RGBA_INTEGER, GL_UNSIGNED_SHORT),
    F(0x8236, "GL_R32UI", UINT32, 1, GL_RED_INTEGER, GL_UNSIGNED_INT),
    F(0x823C, "GL_RG32UI", UINT32, 2, GL_RG_INTEGER, GL_UNSIGNED_INT),
    F(0x8D70, "GL_RGBA32UI", UINT32, 4, GL_RGBA_INTEGER, GL_UNSIGNED_INT),
    D(0x1902, "GL_DEPTH_COMPONENT"),
    D(0x81A5, "GL_DEPTH_COMPONENT16"),
    D(0x81A6, "GL_DEPTH_COMPONENT24"),
    D(0x81A7, "GL_DEPTH_COMPONENT32"),
    D(0x8CAC, "GL_DEPTH_COMPONENT32F"),
    D(0x84F9, "GL_DEPTH_STENCIL"),
    D(0x88F0, "GL_DEPTH24_STENCIL8"),
    D(0x8CAD, "GL_DEPTH32F_STENCIL8"),
};

#undef F
#undef D

const glt_format *glt_format_find(GLenum internal_format) {
    for (size_t i = 0; i < sizeof formats / sizeof *formats; ++i)
        if (formats[i].internal_format == internal_format) return &formats[i];
    return NULL;
}

/* Formats we refuse, named so that the error says what the image is. */
static const struct {
    GLenum fmt;
    const char *name;
    int kind; /* 1 depth/stencil, 2 other */
} known[] = {
    {0x8D48, "GL_STENCIL_INDEX8", 1},
    {0x1901, "GL_STENCIL_INDEX", 1},
    {0x8C41, "GL_SRGB8", 2},
    {0x8815, "GL_RGB32F", 2},
    {0x881B, "GL_RGB16F", 2},
    {0x8C3A, "GL_R11F_G11F_B10F", 2},
    {0x8C3D, "GL_RGB9_E5", 2},
    {0x8059, "GL_RGB10_A2", 2},
    {0x8D62, "GL_RGB565", 2},
    {0x8F94, "GL_R8_SNORM", 2},
    {0x8F97, "GL_RGBA8_SNORM", 2},
    {0x8231, "GL_R8I", 2},
    {0x8D8E, "GL_RGBA8I", 2},
    {0x8235, "GL_R32I", 2},
    {0x8D82, "GL_RGBA32I", 2},
};

const char *glt_format_name(GLenum internal_format) {
    static _Thread_local char buf[32];
    const glt_format *f = glt_format_find(internal_format);
    if (f && internal_format != 0x1908 && internal_format != 0x1907) return f->name;
    if (internal_format == 0x1908) return "GL_RGBA";
    if (internal_format == 0x1907) return "GL_RGB";
    for (size_t i = 0; i < sizeof known / sizeof *known; ++i)
        if (known[i].fmt == internal_format) return known[i].name;
    snprintf(buf, sizeof buf, "format 0x%04X", internal_format);
    return buf;
}

const char *glt_format_refusal_hint(GLenum internal_format) {
    for (size_t i = 0; i < sizeof known / sizeof *known; ++i)
        if (known[i].fmt == internal_format && known[i].kind == 1)
            return "stencil-only images hold no depth or colour to capture; capture the depth or depth-stencil "
                   "attachment (read as float depth) or a colour attachment instead";
    return "capturable formats are the depth formats (read as float32 depth) and GL_RGBA8, GL_RGB8, GL_SRGB8_ALPHA8, GL_R8, GL_RG8, GL_R16, GL_RG16, "
           "GL_RGBA16, GL_R16F, GL_RG16F, GL_RGBA16F, GL_R32F, GL_RG32F, GL_RGBA32F and the unsigned "
           "integer formats R8UI..RGBA32UI; render into one of those (or blit into one) and capture it";
}

const char *glt_target_name(GLenum target) {
    switch (target) {
    case GL_TEXTURE_2D: return "GL_TEXTURE_2D";
    case GL_TEXTURE_RECTANGLE: return "GL_TEXTURE_RECTANGLE";
    case GL_RENDERBUFFER: return "GL_RENDERBUFFER";
    case GL_TEXTURE_2D_MULTISAMPLE: return "GL_TEXTURE_2D_MULTISAMPLE";
    default: return "unknown target";
    }
}
