/*
 * Entering an object's own GL context to release it. A CUDA registration of a GL object can only be
 * undone with that object's context current (cudaGraphicsUnregisterResource fails with
 * cudaErrorInvalidGraphicsContext otherwise), and Python releases objects whenever their last reference
 * goes, often with another context current or none. For EGL contexts (gltensor's headless ones and most
 * engines' headless ones) the release makes the object's context current for the duration, surfaceless,
 * and then puts the caller's back. Where that cannot be done (a GLX context, one destroyed already, or
 * current in another thread) the caller leaves the registration to the driver, which drops it with the
 * context, rather than making a call that fails.
 */
#include "gl/gl.h"

#include <string.h>

int glt_gl_context_enter(glt_gl_context_id ctx, glt_gl_context_saved *saved) {
    saved->switched = 0;
    saved->prev = glt_current_gl_context();
    if (glt_same_gl_context(saved->prev, ctx)) return 1;
    /* A destroyed context cannot be entered; its pointer may belong to a newer context by now, and releasing
     * into that one would delete the newer context's objects of the same names. */
    if (!glt_gl_context_alive(ctx)) return 0;
    if (ctx.api != GLT_API_EGL || (saved->prev.api != GLT_API_EGL && saved->prev.api != GLT_API_NONE)) return 0;
    const glt_egl *egl = glt_egl_load();
    if (!egl || !egl->MakeCurrent || !egl->GetCurrentSurface) return 0;
    saved->draw = saved->prev.api == GLT_API_EGL ? egl->GetCurrentSurface(EGL_DRAW) : EGL_NO_SURFACE;
    saved->read = saved->prev.api == GLT_API_EGL ? egl->GetCurrentSurface(EGL_READ) : EGL_NO_SURFACE;
    if (!egl->MakeCurrent(ctx.display, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx.context)) {
        if (egl->GetError) egl->GetError(); /* EGL_BAD_CONTEXT / EGL_BAD_ACCESS: not ours to take */
        return 0;
    }
    saved->switched = 1;
    saved->entered = ctx;
    /* The handle was valid, but it may be a newer context at the old pointer: its marker says (context_tag.c). */
    if (!glt_same_gl_context(glt_current_gl_context(), ctx)) {
        glt_gl_context_leave(saved);
        return 0;
    }
    return 1;
}

void glt_gl_context_leave(glt_gl_context_saved *saved) {
    if (!saved->switched) return;
    saved->switched = 0;
    const glt_egl *egl = glt_egl_load();
    if (saved->prev.api == GLT_API_EGL)
        egl->MakeCurrent(saved->prev.display, saved->draw, saved->read, saved->prev.context);
    else
        egl->MakeCurrent(saved->entered.display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
}

/* ---- the public record / restore of whatever context the caller had current (gltensor.h) ---- */

glt_status glt_context_save_current(glt_saved_context *saved) {
    if (!saved) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_save_current: saved is NULL");
    memset(saved, 0, sizeof *saved);
    saved->size = sizeof *saved;
    const glt_egl *egl = glt_egl_load();
    if (egl) {
        saved->egl_api = egl->QueryAPI ? egl->QueryAPI() : EGL_OPENGL_API;
        void *c = egl->GetCurrentContext();
        if (c) {
            saved->system = GLT_WINDOW_SYSTEM_EGL;
            saved->context = c;
            saved->display = egl->GetCurrentDisplay ? egl->GetCurrentDisplay() : EGL_NO_DISPLAY;
            saved->draw = (uintptr_t)(egl->GetCurrentSurface ? egl->GetCurrentSurface(EGL_DRAW) : EGL_NO_SURFACE);
            saved->read = (uintptr_t)(egl->GetCurrentSurface ? egl->GetCurrentSurface(EGL_READ) : EGL_NO_SURFACE);
            return GLT_OK;
        }
    }
    glt_clear_error(); /* a missing libEGL is no failure here: GLX may be current, or nothing */
    const glt_glx *glx = glt_glx_load();
    void *c = glx ? glx->GetCurrentContext() : NULL;
    if (c) {
        saved->system = GLT_WINDOW_SYSTEM_GLX;
        saved->context = c;
        saved->display = glx->GetCurrentDisplay();
        saved->draw = glx->GetCurrentDrawable();
        saved->read = glx->GetCurrentReadDrawable();
    }
    return GLT_OK;
}

int glt_saved_context_is_current(const glt_saved_context *saved) {
    if (!saved) return 0;
    if (saved->system == GLT_WINDOW_SYSTEM_EGL) {
        const glt_egl *egl = glt_egl_load();
        return egl && egl->GetCurrentContext() == saved->context;
    }
    if (saved->system == GLT_WINDOW_SYSTEM_GLX) {
        const glt_glx *glx = glt_glx_load();
        return glx && glx->GetCurrentContext() == saved->context;
    }
    return 0;
}

/* report 0: a failure records no message (gltensor's own restores after a failed call keep that call's message). */
static glt_status restore(const glt_saved_context *saved, int report) {
    if (saved->system == GLT_WINDOW_SYSTEM_EGL || (saved->system == GLT_WINDOW_SYSTEM_NONE && saved->egl_api)) {
        const glt_egl *egl = glt_egl_load();
        if (!egl) return GLT_EGL_ERROR;
        if (!report && !egl->MakeCurrent) return GLT_EGL_ERROR;
        if (saved->egl_api && egl->BindAPI) egl->BindAPI(saved->egl_api);
        if (saved->system == GLT_WINDOW_SYSTEM_NONE || egl->GetCurrentContext() == saved->context) return GLT_OK;
        if (!egl->MakeCurrent(saved->display, (EGLSurface)saved->draw, (EGLSurface)saved->read, saved->context))
            return !report ? GLT_EGL_ERROR : glt_fail(GLT_EGL_ERROR,
                            "could not make the recorded EGL context %p current again (eglMakeCurrent: EGL error "
                            "0x%x): it was destroyed, or is current in another thread; make it current from the "
                            "thread that renders with it",
                            saved->context, egl->GetError ? (unsigned)egl->GetError() : 0u);
        return GLT_OK;
    }
    if (saved->system == GLT_WINDOW_SYSTEM_GLX) {
        const glt_glx *glx = glt_glx_load();
        if (!glx) return !report ? GLT_GL_ERROR : glt_fail(GLT_GL_ERROR, "glt_context_restore: a GLX context was recorded but libGLX cannot be loaded");
        if (glx->GetCurrentContext() == saved->context) return GLT_OK;
        if (!glx->MakeContextCurrent(saved->display, saved->draw, saved->read, saved->context))
            return !report ? GLT_GL_ERROR : glt_fail(GLT_GL_ERROR,
                            "could not make the recorded GLX context %p current again (glXMakeContextCurrent "
                            "failed): it was destroyed, or is current in another thread; make it current from the "
                            "thread that renders with it",
                            saved->context);
    }
    return GLT_OK;
}

glt_status glt_context_restore(const glt_saved_context *saved) {
    if (!saved) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_restore: saved is NULL");
    GLT_CHECK_STRUCT_SIZE(saved, glt_saved_context);
    return restore(saved, 1);
}

void glt_context_restore_quietly(const glt_saved_context *saved) { restore(saved, 0); }

/* As glt_context_restore, except where nothing was current when `saved` was recorded: then the EGL context current
 * now is released, so that nothing of the caller's stays current after a call that found none. For an adapter whose
 * own context must not stay current outside its calls: gltensor.mujoco.BatchRenderer, where a MuJoCo MjrContext the
 * garbage collector frees between two calls deletes its GL names in whatever context is current. */
glt_status glt_context_restore_or_release(const glt_saved_context *saved) {
    if (!saved) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_restore_or_release: saved is NULL");
    GLT_CHECK_STRUCT_SIZE(saved, glt_saved_context);
    if (saved->system != GLT_WINDOW_SYSTEM_NONE) return restore(saved, 1);
    const glt_egl *egl = glt_egl_load();
    if (!egl || !egl->GetCurrentContext || !egl->MakeCurrent) {
        glt_clear_error(); /* no libEGL: no EGL context can be current to release */
        return GLT_OK;
    }
    if (saved->egl_api && egl->BindAPI) egl->BindAPI(saved->egl_api);
    if (!egl->GetCurrentContext()) return GLT_OK;
    EGLDisplay display = egl->GetCurrentDisplay ? egl->GetCurrentDisplay() : EGL_NO_DISPLAY;
    if (!egl->MakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT))
        return glt_fail(GLT_EGL_ERROR,
                        "could not release the current EGL context (eglMakeCurrent with no context: EGL error 0x%x)",
                        egl->GetError ? (unsigned)egl->GetError() : 0u);
    return GLT_OK;
}
