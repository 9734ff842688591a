/*
 * The identity of a GL context that cannot be confused with a later one.
 *
 * EGL and GLX hand a context out as a pointer, and drivers reuse a destroyed context's pointer for the next
 * context (Mesa often, NVIDIA's EGL every time). An object that remembered only the pointer would act on
 * the newer context's objects of the same names: read its textures, write into them, delete its framebuffer.
 * So each context gets a generation when gltensor first sees it, kept in a registry keyed by the pointer,
 * and every object remembers (pointer, generation). A generation ends, and never comes back, when:
 *   - gltensor's own Context is destroyed (glt_gl_context_forget_owned): exact, no query needed;
 *   - a context gltensor did not create turns out to be gone: eglQueryContext fails on its handle (it was
 *     destroyed and the pointer not reused), or, while the pointer is current, the context's marker is
 *     missing. The marker is a buffer object gltensor creates in the context the first time it sees it,
 *     labelled (glObjectLabel) with the generation, or, without KHR_debug, holding it as its contents. A
 *     new context at the same pointer has no such buffer, or a user buffer of that name without our label.
 * Limits (documented in docs/reliability.md): a context destroyed and replaced at the same pointer by one that
 * shares objects with it (same share group) keeps the marker, so it counts as the same context; a program
 * that deletes buffer names it did not create (a sweep over 1..N) deletes the marker, and objects of that
 * context then report it destroyed; GLX contexts are checked by the marker alone (GLX has no query that
 * fails on a destroyed context).
 */
#include "gl/gl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER_BYTES 16

typedef void (*PFN_glObjectLabel)(GLenum, GLuint, GLsizei, const char *);
typedef void (*PFN_glGetObjectLabel)(GLenum, GLuint, GLsizei, GLsizei *, char *);
typedef EGLBoolean (*PFN_eglQueryContext)(EGLDisplay, EGLContext, EGLint, EGLint *);

typedef struct entry {
    glt_window_api api;
    void *display, *context;
    uint64_t generation;
    int owned;     /* a glt_context: its end is known without asking the driver */
    GLuint marker; /* contexts gltensor did not create: the buffer that proves it is still the same one */
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *entries;
static int n_entries, cap_entries;
static uint64_t next_generation = 1;

static pthread_once_t procs_once = PTHREAD_ONCE_INIT;
static PFN_glObjectLabel object_label;
static PFN_glGetObjectLabel get_object_label;
static PFN_eglQueryContext query_context;

static void load_procs(void) {
    object_label = (PFN_glObjectLabel)glt_gl_proc("glObjectLabel");
    get_object_label = (PFN_glGetObjectLabel)glt_gl_proc("glGetObjectLabel");
    query_context = (PFN_eglQueryContext)glt_gl_proc("eglQueryContext");
}

static void marker_contents(uint64_t generation, unsigned char out[MARKER_BYTES], char *label, size_t label_size) {
    memcpy(out, "gltensor", 8);
    memcpy(out + 8, &generation, 8);
    snprintf(label, label_size, "gltensor context %llu", (unsigned long long)generation);
}

/* Creates the marker of `generation` in the current context; 0 when GL cannot make one (the context is then
 * checked by eglQueryContext alone). */
static GLuint marker_create(const glt_gl *gl, uint64_t generation) {
    unsigned char bytes[MARKER_BYTES];
    char label[48];
    marker_contents(generation, bytes, label, sizeof label);
    GLuint name = 0;
    if (glt_gl_buffer_create(gl, MARKER_BYTES, bytes, &name) != GLT_OK) {
        glt_clear_error();
        return 0;
    }
    if (object_label && get_object_label) {
        object_label(GL_BUFFER_KHR, name, -1, label);
        glt_gl_drain_errors(gl); /* a context below GL 4.3 without KHR_debug: the contents still tell */
    }
    return name;
}

/* Whether the current context still holds the marker of `generation`. */
static int marker_present(const glt_gl *gl, GLuint name, uint64_t generation) {
    if (!name || !gl->IsBuffer(name)) return 0;
    unsigned char want[MARKER_BYTES], have[MARKER_BYTES];
    char label[48], got[48];
    marker_contents(generation, want, label, sizeof label);
    if (object_label && get_object_label) {
        GLsizei len = 0;
        got[0] = '\0';
        get_object_label(GL_BUFFER_KHR, name, (GLsizei)sizeof got, &len, got);
        if (len > 0) return len == (GLsizei)strlen(label) && !memcmp(got, label, (size_t)len);
    }
    size_t size = 0;
    if (glt_gl_buffer_size(gl, name, &size, NULL) != GLT_OK || size != MARKER_BYTES ||
        glt_gl_buffer_get(gl, name, 0, MARKER_BYTES, have) != GLT_OK) {
        glt_clear_error();
        return 0;
    }
    return !memcmp(want, have, MARKER_BYTES);
}

static entry *find(glt_window_api api, void *context) {
    for (int i = 0; i < n_entries; ++i)
        if (entries[i].api == api && entries[i].context == context) return &entries[i];
    return NULL;
}

static entry *find_generation(uint64_t generation) {
    for (int i = 0; i < n_entries; ++i)
        if (entries[i].generation == generation) return &entries[i];
    return NULL;
}

static void drop(entry *e) { *e = entries[--n_entries]; }

/* A context gltensor did not create is gone when EGL no longer knows its handle. */
static int egl_handle_gone(const entry *e) {
    if (e->owned || e->api != GLT_API_EGL || !query_context) return 0;
    EGLint type = 0;
    if (query_context(e->display, e->context, EGL_CONTEXT_CLIENT_TYPE, &type)) return 0;
    const glt_egl *egl = glt_egl_load();
    if (egl && egl->GetError) egl->GetError(); /* EGL_BAD_CONTEXT: consumed, so later EGL errors are ours */
    return 1;
}

/* A new generation for (api, display, context); NULL only when memory ran out. */
static entry *add(glt_window_api api, void *display, void *context, int owned) {
    if (n_entries == cap_entries) {
        int cap = cap_entries ? 2 * cap_entries : 16;
        entry *grown = realloc(entries, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        entries = grown;
        cap_entries = cap;
    }
    entry *e = &entries[n_entries++];
    memset(e, 0, sizeof *e);
    e->api = api;
    e->display = display;
    e->context = context;
    e->owned = owned;
    e->generation = next_generation++;
    return e;
}

uint64_t glt_gl_context_tag(glt_window_api api, void *display, void *context) {
    if (api == GLT_API_NONE || !context) return 0;
    pthread_once(&procs_once, load_procs);
    const glt_gl *gl = glt_gl_load();
    if (!gl) {
        glt_clear_error();
        return 0;
    }
    pthread_mutex_lock(&lock);
    entry *e = find(api, context);
    /* The pointer is current in this thread, so the marker can be asked about. */
    if (e && !e->owned && !marker_present(gl, e->marker, e->generation)) {
        drop(e);
        e = NULL;
    }
    uint64_t generation = 0;
    if (!e && n_entries >= 64) /* a program that makes many contexts: drop those EGL no longer knows */
        for (int i = n_entries - 1; i >= 0; --i)
            if (egl_handle_gone(&entries[i])) drop(&entries[i]);
    if (!e && (e = add(api, display, context, 0)) != NULL) e->marker = marker_create(gl, e->generation);
    if (e) generation = e->generation;
    pthread_mutex_unlock(&lock);
    return generation;
}

glt_gl_context_id glt_current_gl_context(void) {
    glt_gl_context_id id = glt_current_gl_handles();
    if (id.api != GLT_API_NONE) id.generation = glt_gl_context_tag(id.api, id.display, id.context);
    return id;
}

void glt_gl_context_own(void *display, void *context) {
    pthread_mutex_lock(&lock);
    entry *e = find(GLT_API_EGL, context);
    if (e) drop(e); /* a new context at this pointer proves the earlier one gone */
    add(GLT_API_EGL, display, context, 1);
    pthread_mutex_unlock(&lock);
}

void glt_gl_context_forget_owned(void *display, void *context) {
    (void)display;
    pthread_mutex_lock(&lock);
    entry *e = find(GLT_API_EGL, context);
    if (e) drop(e);
    pthread_mutex_unlock(&lock);
}

int glt_gl_context_alive(glt_gl_context_id id) {
    if (id.api == GLT_API_NONE || !id.generation) return 1; /* nothing to prove gone */
    pthread_once(&procs_once, load_procs);
    pthread_mutex_lock(&lock);
    entry *e = find_generation(id.generation);
    if (e && egl_handle_gone(e)) {
        drop(e);
        e = NULL;
    }
    pthread_mutex_unlock(&lock);
    return e != NULL;
}

int glt_same_gl_context(glt_gl_context_id a, glt_gl_context_id b) {
    return a.api == b.api && a.context == b.context && a.generation == b.generation;
}

static const char *api_name(glt_window_api api) { return api == GLT_API_EGL ? "EGL" : "GLX"; }

glt_status glt_check_gl_context(glt_gl_context_id expected, const char *what) {
    if (expected.api != GLT_API_NONE && !glt_gl_context_alive(expected))
        return glt_fail(GLT_CLOSED,
                        "%s was made in an OpenGL context that has been destroyed since (%s context %p, closed or "
                        "destroyed by its owner; a context created later may have the same pointer but is another "
                        "context); close this object and create a new one in the context you use now",
                        what, api_name(expected.api), expected.context);
    glt_gl_context_id now = glt_current_gl_context();
    if (now.api == GLT_API_NONE)
        return glt_fail(GLT_NO_CONTEXT,
                        "%s: no OpenGL context is current in this thread; make the context that owns it "
                        "current first (ctx.make_current(), eglMakeCurrent or glXMakeCurrent)",
                        what);
    if (expected.api != GLT_API_NONE && !glt_same_gl_context(now, expected)) {
        /* Tagging `now` may just have found the expected generation gone (same pointer, new context). */
        if (!glt_gl_context_alive(expected))
            return glt_check_gl_context(expected, what);
        return glt_fail(GLT_WRONG_CONTEXT,
                        "%s belongs to another OpenGL context (%s %p) than the one current in this thread "
                        "(%s %p); make its own context current, or create a new gltensor object in this context",
                        what, api_name(expected.api), expected.context, api_name(now.api), now.context);
    }
    return GLT_OK;
}
