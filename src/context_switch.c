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
#include "internal.h"

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
