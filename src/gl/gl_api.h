/*
 * The slice of OpenGL and EGL that gltensor calls, declared here because the
 * build machine may have no GL headers, and resolved at run time (gl_loader.c)
 * so that the library links against no GL library and works with whichever
 * context (EGL or GLX) the caller made current.
 */
#ifndef GLT_GL_API_H
#define GLT_GL_API_H

#include <stddef.h>
#include <stdint.h>

typedef unsigned int GLenum;
typedef unsigned int GLuint;
typedef int GLint;
typedef int GLsizei;
typedef unsigned char GLboolean;
typedef unsigned int GLbitfield;
typedef ptrdiff_t GLintptr;
typedef ptrdiff_t GLsizeiptr;
typedef unsigned char GLubyte;

#define GL_NO_ERROR 0
#define GL_INVALID_ENUM 0x0500
#define GL_INVALID_VALUE 0x0501
#define GL_INVALID_OPERATION 0x0502
#define GL_OUT_OF_MEMORY 0x0505
#define GL_INVALID_FRAMEBUFFER_OPERATION 0x0506

#define GL_VENDOR 0x1F00
#define GL_RENDERER 0x1F01
#define GL_VERSION 0x1F02
#define GL_MAJOR_VERSION 0x821B
#define GL_MINOR_VERSION 0x821C

#define GL_TEXTURE_2D 0x0DE1
#define GL_TEXTURE_RECTANGLE 0x84F5
#define GL_TEXTURE_2D_MULTISAMPLE 0x9100
#define GL_RENDERBUFFER 0x8D41
#define GL_TEXTURE_BINDING_2D 0x8069
#define GL_TEXTURE_BINDING_RECTANGLE 0x84F6
#define GL_RENDERBUFFER_BINDING 0x8CA7
#define GL_TEXTURE_WIDTH 0x1000
#define GL_TEXTURE_HEIGHT 0x1001
#define GL_TEXTURE_INTERNAL_FORMAT 0x1003
#define GL_TEXTURE_SAMPLES 0x9106
#define GL_RENDERBUFFER_WIDTH 0x8D42
#define GL_RENDERBUFFER_HEIGHT 0x8D43
#define GL_RENDERBUFFER_INTERNAL_FORMAT 0x8D44
#define GL_RENDERBUFFER_SAMPLES 0x8CAB

#define GL_FRAMEBUFFER 0x8D40
#define GL_READ_FRAMEBUFFER 0x8CA8
#define GL_READ_FRAMEBUFFER_BINDING 0x8CAA
#define GL_COLOR_ATTACHMENT0 0x8CE0
#define GL_FRAMEBUFFER_COMPLETE 0x8CD5

#define GL_DRAW_FRAMEBUFFER 0x8CA9
#define GL_DRAW_FRAMEBUFFER_BINDING 0x8CA6
#define GL_DEPTH_ATTACHMENT 0x8D00
#define GL_DEPTH_STENCIL_ATTACHMENT 0x821A
#define GL_COLOR_BUFFER_BIT 0x00004000
#define GL_DEPTH_BUFFER_BIT 0x00000100
#define GL_NEAREST 0x2600
#define GL_NONE 0
#define GL_SCISSOR_TEST 0x0C11
#define GL_FRAMEBUFFER_SRGB 0x8DB9
#define GL_TEXTURE_BINDING_2D_MULTISAMPLE 0x9104
#define GL_DEPTH_COMPONENT 0x1902
#define GL_COMPUTE_SHADER 0x91B9
#define GL_COMPILE_STATUS 0x8B81
#define GL_LINK_STATUS 0x8B82
#define GL_CURRENT_PROGRAM 0x8B8D
#define GL_SHADER_STORAGE_BUFFER 0x90D2
#define GL_SHADER_STORAGE_BUFFER_BINDING 0x90D3
#define GL_SHADER_STORAGE_BUFFER_START 0x90D4
#define GL_SHADER_STORAGE_BUFFER_SIZE 0x90D5
#define GL_ALL_BARRIER_BITS 0xFFFFFFFF
#define GL_ACTIVE_TEXTURE 0x84E0
#define GL_TEXTURE0 0x84C0
#define GL_SAMPLER_BINDING 0x8919
#define GL_TEXTURE_MIN_FILTER 0x2801
#define GL_TEXTURE_MAG_FILTER 0x2800
#define GL_TEXTURE_COMPARE_MODE 0x884C
#define GL_DYNAMIC_COPY 0x88EA
#define GL_PIXEL_PACK_BUFFER 0x88EB
#define GL_PIXEL_PACK_BUFFER_BINDING 0x88ED
#define GL_STREAM_READ 0x88E1
#define GL_MAP_READ_BIT 0x0001

#define GL_PACK_SWAP_BYTES 0x0D00
#define GL_PACK_ROW_LENGTH 0x0D02
#define GL_PACK_SKIP_ROWS 0x0D03
#define GL_PACK_SKIP_PIXELS 0x0D04
#define GL_PACK_ALIGNMENT 0x0D05

/* pixel transfer formats and types */
#define GL_RED 0x1903
#define GL_RG 0x8227
#define GL_RGB 0x1907
#define GL_RGBA 0x1908
#define GL_RED_INTEGER 0x8D94
#define GL_RG_INTEGER 0x8228
#define GL_RGB_INTEGER 0x8D98
#define GL_RGBA_INTEGER 0x8D99
#define GL_UNSIGNED_BYTE 0x1401
#define GL_UNSIGNED_SHORT 0x1403
#define GL_UNSIGNED_INT 0x1405
#define GL_FLOAT 0x1406
#define GL_HALF_FLOAT 0x140B

/* upload.c / buffer.c: texture writes and buffer objects */
#define GL_COPY_READ_BUFFER 0x8F36
#define GL_COPY_WRITE_BUFFER 0x8F37
#define GL_COPY_READ_BUFFER_BINDING 0x8F36
#define GL_COPY_WRITE_BUFFER_BINDING 0x8F37
#define GL_BUFFER_SIZE 0x8764
#define GL_BUFFER_MAPPED 0x88BC
#define GL_MAP_WRITE_BIT 0x0002
#define GL_MAP_INVALIDATE_RANGE_BIT 0x0004
#define GL_BUFFER_IMMUTABLE_STORAGE 0x821F
#define GL_BUFFER_STORAGE_FLAGS 0x8220
#define GL_STREAM_COPY 0x88E2
#define GL_PIXEL_UNPACK_BUFFER 0x88EC
#define GL_PIXEL_UNPACK_BUFFER_BINDING 0x88EF
#define GL_UNPACK_SWAP_BYTES 0x0CF0
#define GL_UNPACK_ROW_LENGTH 0x0CF2
#define GL_UNPACK_SKIP_ROWS 0x0CF3
#define GL_UNPACK_SKIP_PIXELS 0x0CF4
#define GL_UNPACK_ALIGNMENT 0x0CF5
#define GL_UNPACK_SKIP_IMAGES 0x806D
#define GL_UNPACK_IMAGE_HEIGHT 0x806E
#define GL_STATIC_DRAW 0x88E4
#define GL_DEPTH_STENCIL 0x84F9
#define GL_UNSIGNED_INT_24_8 0x84FA
#define GL_SCISSOR_BOX 0x0C10
#define GL_DEPTH_WRITEMASK 0x0B72
#define GL_DEPTH_CLEAR_VALUE 0x0B73
#define GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT 0x90DF
#define GL_BUFFER_UPDATE_BARRIER_BIT 0x00000200
#define GL_TEXTURE_BASE_LEVEL 0x813C
#define GL_TEXTURE_SWIZZLE_RGBA 0x8E46
#define GL_GREEN 0x1904
#define GL_BLUE 0x1905
#define GL_ALPHA 0x1906
#define GL_BUFFER_KHR 0x82E0 /* KHR_debug object label namespace */
#define EGL_CONTEXT_CLIENT_TYPE 0x3097

typedef GLenum (*PFN_glGetError)(void);
typedef void (*PFN_glGetIntegerv)(GLenum, GLint *);
typedef const GLubyte *(*PFN_glGetString)(GLenum);
typedef void (*PFN_glBindTexture)(GLenum, GLuint);
typedef GLboolean (*PFN_glIsTexture)(GLuint);
typedef void (*PFN_glGetTexLevelParameteriv)(GLenum, GLint, GLenum, GLint *);
typedef void (*PFN_glGetTexImage)(GLenum, GLint, GLenum, GLenum, void *);
typedef void (*PFN_glGetTextureSubImage)(GLuint, GLint, GLint, GLint, GLint, GLsizei, GLsizei, GLsizei, GLenum, GLenum,
                                          GLsizei, void *);
typedef GLboolean (*PFN_glIsRenderbuffer)(GLuint);
typedef void (*PFN_glBindRenderbuffer)(GLenum, GLuint);
typedef void (*PFN_glGetRenderbufferParameteriv)(GLenum, GLenum, GLint *);
typedef void (*PFN_glGenFramebuffers)(GLsizei, GLuint *);
typedef void (*PFN_glDeleteFramebuffers)(GLsizei, const GLuint *);
typedef void (*PFN_glBindFramebuffer)(GLenum, GLuint);
typedef void (*PFN_glFramebufferRenderbuffer)(GLenum, GLenum, GLenum, GLuint);
typedef GLenum (*PFN_glCheckFramebufferStatus)(GLenum);
typedef void (*PFN_glReadBuffer)(GLenum);
typedef void (*PFN_glReadPixels)(GLint, GLint, GLsizei, GLsizei, GLenum, GLenum, void *);
typedef void (*PFN_glPixelStorei)(GLenum, GLint);
typedef void (*PFN_glGenBuffers)(GLsizei, GLuint *);
typedef void (*PFN_glDeleteBuffers)(GLsizei, const GLuint *);
typedef void (*PFN_glBindBuffer)(GLenum, GLuint);
typedef void (*PFN_glBufferData)(GLenum, GLsizeiptr, const void *, GLenum);
typedef void *(*PFN_glMapBufferRange)(GLenum, GLintptr, GLsizeiptr, GLbitfield);
typedef GLboolean (*PFN_glUnmapBuffer)(GLenum);
typedef void (*PFN_glBlitFramebuffer)(GLint, GLint, GLint, GLint, GLint, GLint, GLint, GLint, GLbitfield, GLenum);
typedef void (*PFN_glCopyImageSubData)(GLuint, GLenum, GLint, GLint, GLint, GLint, GLuint, GLenum, GLint, GLint, GLint,
                                       GLint, GLsizei, GLsizei, GLsizei);
typedef void (*PFN_glFramebufferTexture2D)(GLenum, GLenum, GLenum, GLuint, GLint);
typedef void (*PFN_glDrawBuffer)(GLenum);
typedef void (*PFN_glGenRenderbuffers)(GLsizei, GLuint *);
typedef void (*PFN_glDeleteRenderbuffers)(GLsizei, const GLuint *);
typedef void (*PFN_glRenderbufferStorage)(GLenum, GLenum, GLsizei, GLsizei);
typedef GLboolean (*PFN_glIsEnabled)(GLenum);
typedef void (*PFN_glEnable)(GLenum);
typedef void (*PFN_glDisable)(GLenum);
/* Compute-shader depth conversion (GL 4.3+); optional: absent entry points disable that path. */
typedef char GLchar;
typedef int64_t GLint64;
typedef GLuint (*PFN_glCreateShader)(GLenum);
typedef void (*PFN_glShaderSource)(GLuint, GLsizei, const GLchar *const *, const GLint *);
typedef void (*PFN_glCompileShader)(GLuint);
typedef void (*PFN_glGetShaderiv)(GLuint, GLenum, GLint *);
typedef void (*PFN_glGetShaderInfoLog)(GLuint, GLsizei, GLsizei *, GLchar *);
typedef GLuint (*PFN_glCreateProgram)(void);
typedef void (*PFN_glAttachShader)(GLuint, GLuint);
typedef void (*PFN_glLinkProgram)(GLuint);
typedef void (*PFN_glGetProgramiv)(GLuint, GLenum, GLint *);
typedef void (*PFN_glDeleteShader)(GLuint);
typedef void (*PFN_glDeleteProgram)(GLuint);
typedef void (*PFN_glUseProgram)(GLuint);
typedef GLint (*PFN_glGetUniformLocation)(GLuint, const GLchar *);
typedef void (*PFN_glProgramUniform2i)(GLuint, GLint, GLint, GLint);
typedef void (*PFN_glProgramUniform1i)(GLuint, GLint, GLint);
typedef void (*PFN_glTextureView)(GLuint, GLenum, GLuint, GLenum, GLuint, GLuint, GLuint, GLuint);
typedef void (*PFN_glDispatchCompute)(GLuint, GLuint, GLuint);
typedef void (*PFN_glMemoryBarrier)(GLbitfield);
typedef void (*PFN_glBindBufferBase)(GLenum, GLuint, GLuint);
typedef void (*PFN_glBindBufferRange)(GLenum, GLuint, GLuint, GLintptr, GLsizeiptr);
typedef void (*PFN_glGetIntegeri_v)(GLenum, GLuint, GLint *);
typedef void (*PFN_glGetInteger64i_v)(GLenum, GLuint, GLint64 *);
typedef void (*PFN_glActiveTexture)(GLenum);
typedef void (*PFN_glGenSamplers)(GLsizei, GLuint *);
typedef void (*PFN_glDeleteSamplers)(GLsizei, const GLuint *);
typedef void (*PFN_glBindSampler)(GLuint, GLuint);
typedef void (*PFN_glSamplerParameteri)(GLuint, GLenum, GLint);
typedef void (*PFN_glGenTextures)(GLsizei, GLuint *);
typedef void (*PFN_glDeleteTextures)(GLsizei, const GLuint *);
typedef void (*PFN_glTexStorage2D)(GLenum, GLsizei, GLenum, GLsizei, GLsizei);
typedef void (*PFN_glScissor)(GLint, GLint, GLsizei, GLsizei);
typedef void (*PFN_glClearDepth)(double);
typedef void (*PFN_glClear)(GLbitfield);
typedef void (*PFN_glDepthMask)(GLboolean);
typedef void (*PFN_glGetDoublev)(GLenum, double *);
typedef void (*PFN_glTexSubImage2D)(GLenum, GLint, GLint, GLint, GLsizei, GLsizei, GLenum, GLenum, const void *);
/* upload.c / buffer.c (required: GL 3.0 has them all) */
typedef GLboolean (*PFN_glIsBuffer)(GLuint);
typedef void (*PFN_glGetBufferParameteriv)(GLenum, GLenum, GLint *);
typedef void (*PFN_glGetBufferParameteri64v)(GLenum, GLenum, GLint64 *);
typedef void (*PFN_glGetBufferSubData)(GLenum, GLintptr, GLsizeiptr, void *);
typedef void (*PFN_glCopyBufferSubData)(GLenum, GLenum, GLintptr, GLintptr, GLsizeiptr);

/* slot_writer.c: fences, and GL_EXT_memory_object(_fd) to write into memory another process exported */
typedef struct __GLsync *GLsync;
typedef uint64_t GLuint64;
#define GL_SYNC_GPU_COMMANDS_COMPLETE 0x9117
#define GL_SYNC_FLUSH_COMMANDS_BIT 0x00000001
#define GL_ALREADY_SIGNALED 0x911A
#define GL_TIMEOUT_EXPIRED 0x911B
#define GL_CONDITION_SATISFIED 0x911C
#define GL_WAIT_FAILED 0x911D
#define GL_EXTENSIONS 0x1F03
#define GL_NUM_EXTENSIONS 0x821D
#define GL_HANDLE_TYPE_OPAQUE_FD_EXT 0x9586
#define GL_NUM_DEVICE_UUIDS_EXT 0x9596
#define GL_DEVICE_UUID_EXT 0x9597
#define GL_UUID_SIZE_EXT 16
#define GL_READ_BUFFER 0x0C02
typedef GLsync (*PFN_glFenceSync)(GLenum, GLbitfield);
typedef GLenum (*PFN_glClientWaitSync)(GLsync, GLbitfield, GLuint64);
typedef void (*PFN_glDeleteSync)(GLsync);
typedef void (*PFN_glFlush)(void);
typedef const GLubyte *(*PFN_glGetStringi)(GLenum, GLuint);
typedef void (*PFN_glBufferSubData)(GLenum, GLintptr, GLsizeiptr, const void *);
typedef void (*PFN_glCreateMemoryObjectsEXT)(GLsizei, GLuint *);
typedef void (*PFN_glDeleteMemoryObjectsEXT)(GLsizei, const GLuint *);
typedef void (*PFN_glImportMemoryFdEXT)(GLuint, GLuint64, GLenum, GLint);
typedef void (*PFN_glBufferStorageMemEXT)(GLenum, GLsizeiptr, GLuint, GLuint64);
typedef void (*PFN_glBufferStorage)(GLenum, GLsizeiptr, const void *, GLbitfield);
typedef void (*PFN_glGetUnsignedBytei_vEXT)(GLenum, GLuint, GLubyte *);

/* The GL entry points gltensor uses; filled once by glt_gl_load(). */
typedef struct glt_gl {
    PFN_glGetError GetError;
    PFN_glGetIntegerv GetIntegerv;
    PFN_glGetString GetString;
    PFN_glBindTexture BindTexture;
    PFN_glIsTexture IsTexture;
    PFN_glGetTexLevelParameteriv GetTexLevelParameteriv;
    PFN_glGetTexImage GetTexImage;
    PFN_glIsRenderbuffer IsRenderbuffer;
    PFN_glBindRenderbuffer BindRenderbuffer;
    PFN_glGetRenderbufferParameteriv GetRenderbufferParameteriv;
    PFN_glGenFramebuffers GenFramebuffers;
    PFN_glDeleteFramebuffers DeleteFramebuffers;
    PFN_glBindFramebuffer BindFramebuffer;
    PFN_glFramebufferRenderbuffer FramebufferRenderbuffer;
    PFN_glCheckFramebufferStatus CheckFramebufferStatus;
    PFN_glReadBuffer ReadBuffer;
    PFN_glReadPixels ReadPixels;
    PFN_glPixelStorei PixelStorei;
    PFN_glGenBuffers GenBuffers;
    PFN_glDeleteBuffers DeleteBuffers;
    PFN_glBindBuffer BindBuffer;
    PFN_glBufferData BufferData;
    PFN_glMapBufferRange MapBufferRange;
    PFN_glUnmapBuffer UnmapBuffer;
    PFN_glBlitFramebuffer BlitFramebuffer;
    PFN_glFramebufferTexture2D FramebufferTexture2D;
    PFN_glDrawBuffer DrawBuffer;
    PFN_glGenRenderbuffers GenRenderbuffers;
    PFN_glDeleteRenderbuffers DeleteRenderbuffers;
    PFN_glRenderbufferStorage RenderbufferStorage;
    PFN_glIsEnabled IsEnabled;
    PFN_glEnable Enable;
    PFN_glDisable Disable;
    /* optional (NULL when absent) */
    PFN_glCreateShader CreateShader;
    PFN_glShaderSource ShaderSource;
    PFN_glCompileShader CompileShader;
    PFN_glGetShaderiv GetShaderiv;
    PFN_glGetShaderInfoLog GetShaderInfoLog;
    PFN_glCreateProgram CreateProgram;
    PFN_glAttachShader AttachShader;
    PFN_glLinkProgram LinkProgram;
    PFN_glGetProgramiv GetProgramiv;
    PFN_glDeleteShader DeleteShader;
    PFN_glDeleteProgram DeleteProgram;
    PFN_glUseProgram UseProgram;
    PFN_glGetUniformLocation GetUniformLocation;
    PFN_glProgramUniform2i ProgramUniform2i;
    PFN_glDispatchCompute DispatchCompute;
    PFN_glMemoryBarrier MemoryBarrier;
    PFN_glBindBufferBase BindBufferBase;
    PFN_glBindBufferRange BindBufferRange;
    PFN_glGetIntegeri_v GetIntegeri_v;
    PFN_glGetInteger64i_v GetInteger64i_v;
    PFN_glActiveTexture ActiveTexture;
    PFN_glGenSamplers GenSamplers;
    PFN_glDeleteSamplers DeleteSamplers;
    PFN_glBindSampler BindSampler;
    PFN_glSamplerParameteri SamplerParameteri;
    PFN_glGenTextures GenTextures;
    PFN_glDeleteTextures DeleteTextures;
    PFN_glTexStorage2D TexStorage2D;
    PFN_glTexSubImage2D TexSubImage2D;
    PFN_glScissor Scissor; /* these five: the depth path check of depth_probe.c */
    PFN_glClearDepth ClearDepth;
    PFN_glClear Clear;
    PFN_glDepthMask DepthMask;
    PFN_glGetDoublev GetDoublev;
    /* GL 4.3 / ARB_copy_image (NULL when absent): BatchRenderer's sample sheet (gltiles.c) */
    PFN_glCopyImageSubData CopyImageSubData;
    /* upload.c / buffer.c (loaded as required entry points; TexSubImage2D above is checked where used) */
    PFN_glIsBuffer IsBuffer;
    PFN_glGetBufferParameteriv GetBufferParameteriv;
    PFN_glGetBufferParameteri64v GetBufferParameteri64v;
    PFN_glGetBufferSubData GetBufferSubData;
    PFN_glCopyBufferSubData CopyBufferSubData;
    int has_compute; /* every optional entry point above was found */
    /* GL 4.5 (ARB_get_texture_sub_image): reads a rectangle of a texture. Resolved on its own, NULL when absent;
     * usable only in a context of version 4.5 or later. */
    PFN_glGetTextureSubImage GetTextureSubImage;
    /* slot_writer.c: each resolved on its own, NULL when absent (the writer says which is missing) */
    PFN_glFenceSync FenceSync;
    PFN_glClientWaitSync ClientWaitSync;
    PFN_glDeleteSync DeleteSync;
    PFN_glFlush Flush;
    PFN_glGetStringi GetStringi;
    PFN_glBufferSubData BufferSubData;
    PFN_glProgramUniform1i ProgramUniform1i; /* slot_pack.c (with the compute entry points above) */
    PFN_glTextureView TextureView;           /* slot_pack.c, sRGB slots only */
    PFN_glCreateMemoryObjectsEXT CreateMemoryObjectsEXT;
    PFN_glDeleteMemoryObjectsEXT DeleteMemoryObjectsEXT;
    PFN_glImportMemoryFdEXT ImportMemoryFdEXT;
    PFN_glBufferStorageMemEXT BufferStorageMemEXT;
    PFN_glGetUnsignedBytei_vEXT GetUnsignedBytei_vEXT;
    PFN_glBufferStorage BufferStorage; /* GL 4.4 */
} glt_gl;

/* ---- EGL ---- */
typedef void *EGLDisplay;
typedef void *EGLContext;
typedef void *EGLSurface;
typedef void *EGLConfig;
typedef void *EGLDeviceEXT;
typedef int32_t EGLint;
typedef unsigned int EGLBoolean;
typedef unsigned int EGLenum;
typedef intptr_t EGLAttrib;

#define EGL_NO_CONTEXT ((EGLContext)0)
#define EGL_NO_DISPLAY ((EGLDisplay)0)
#define EGL_NO_SURFACE ((EGLSurface)0)
#define EGL_NO_CONFIG_KHR ((EGLConfig)0)
#define EGL_SUCCESS 0x3000
#define EGL_NONE 0x3038
#define EGL_EXTENSIONS 0x3055
#define EGL_VENDOR 0x3053
#define EGL_OPENGL_API 0x30A2
#define EGL_CONTEXT_MAJOR_VERSION 0x3098
#define EGL_CONTEXT_MINOR_VERSION 0x30FB
#define EGL_CONTEXT_OPENGL_PROFILE_MASK 0x30FD
#define EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT 0x00000001
#define EGL_PLATFORM_DEVICE_EXT 0x313F
#define EGL_PLATFORM_SURFACELESS_MESA 0x31DD
#define EGL_CUDA_DEVICE_NV 0x323A
#define EGL_DRM_DEVICE_FILE_EXT 0x3233
#define EGL_DRM_RENDER_NODE_FILE_EXT 0x3377
#define EGL_RENDERER_EXT 0x335F

#define EGL_DRAW 0x3059
#define EGL_READ 0x305A

typedef EGLDisplay (*PFN_eglGetCurrentDisplay)(void);
typedef EGLSurface (*PFN_eglGetCurrentSurface)(EGLint);
typedef EGLenum (*PFN_eglQueryAPI)(void);
typedef EGLContext (*PFN_eglGetCurrentContext)(void);
typedef void *(*PFN_eglGetProcAddress)(const char *);
typedef EGLint (*PFN_eglGetError)(void);
typedef EGLBoolean (*PFN_eglInitialize)(EGLDisplay, EGLint *, EGLint *);
typedef EGLBoolean (*PFN_eglTerminate)(EGLDisplay);
typedef EGLBoolean (*PFN_eglBindAPI)(EGLenum);
typedef EGLContext (*PFN_eglCreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint *);
typedef EGLBoolean (*PFN_eglDestroyContext)(EGLDisplay, EGLContext);
typedef EGLBoolean (*PFN_eglMakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext);
typedef const char *(*PFN_eglQueryString)(EGLDisplay, EGLint);
typedef EGLBoolean (*PFN_eglQueryDevicesEXT)(EGLint, EGLDeviceEXT *, EGLint *);
typedef EGLBoolean (*PFN_eglQueryDeviceAttribEXT)(EGLDeviceEXT, EGLint, EGLAttrib *);
typedef const char *(*PFN_eglQueryDeviceStringEXT)(EGLDeviceEXT, EGLint);
typedef EGLDisplay (*PFN_eglGetPlatformDisplayEXT)(EGLenum, void *, const EGLint *);

typedef struct glt_egl {
    PFN_eglGetCurrentDisplay GetCurrentDisplay;
    PFN_eglGetCurrentContext GetCurrentContext;
    PFN_eglGetCurrentSurface GetCurrentSurface;
    PFN_eglQueryAPI QueryAPI;
    PFN_eglGetProcAddress GetProcAddress;
    PFN_eglGetError GetError;
    PFN_eglInitialize Initialize;
    PFN_eglTerminate Terminate;
    PFN_eglBindAPI BindAPI;
    PFN_eglCreateContext CreateContext;
    PFN_eglDestroyContext DestroyContext;
    PFN_eglMakeCurrent MakeCurrent;
    PFN_eglQueryString QueryString;
    /* extensions, NULL when absent */
    PFN_eglQueryDevicesEXT QueryDevicesEXT;
    PFN_eglQueryDeviceAttribEXT QueryDeviceAttribEXT;
    PFN_eglQueryDeviceStringEXT QueryDeviceStringEXT;
    PFN_eglGetPlatformDisplayEXT GetPlatformDisplayEXT;
} glt_egl;

#endif
