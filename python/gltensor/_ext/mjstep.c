/* mjstep.c: N MuJoCo environments' physics stepped by a pool of C threads that never hold the GIL, for
 * gltensor.mujoco's batched path (python/gltensor/mujoco/_physics.py).
 *
 * Why in C: a Gymnasium MuJoCo env's do_simulation is `data.ctrl[:] = action; mj_step(model, data, nstep);
 * mj_rnePostConstraint(model, data)`. Called from Python threads, every call takes the GIL back, so 16 threads
 * stepping 256 envs ran at a third of mujoco.rollout's speed and starved the render thread beside them of the GIL
 * (H100 host). Here each env's step is those same MuJoCo calls, in the same order, from a C thread; the caller's
 * thread takes the finished env indices one by one (next()) and draws each while the others still step.
 *
 * What is trusted: MuJoCo's functions and every mjModel/mjData/ctrl address come from gltensor's own Python code
 * (the loaded libmujoco's symbols, MjModel._address, MjData._address, data.ctrl's buffer), which keeps the objects
 * alive while this stepper exists; nothing here comes from a user. A MuJoCo fatal error (mju_error) inside mj_step
 * in one of these threads goes to MuJoCo's default handler, as in its own rollout threads.
 *
 * Each job's byte per env says what that env's step is (its "plan"), so one pool serves both gltensor paths:
 * Gymnasium's do_simulation above, and dm_control's Physics.step(nstep) for gltensor.mujoco._dmc_physics, whose task sets
 * ctrl in Python (before_step) and whose legacy step is mj_step2, mj_step x (nstep - 1), mj_step1 (RK4: mj_step x
 * nstep, mj_step1), exactly the calls of dm_control's _step_with_up_to_date_position_velocity, in its order.
 *
 * The gather (Gymnasium's path): the task's observations and rewards read a few MjData fields of every env before
 * and after its step. Stacking them in Python (np.stack of N views per field, twice a step) ran in the caller's
 * thread, outside the overlap with the render (about 1.7 ms a step at N = 256 on an H200 host). With set_gather(),
 * each env's thread copies those fields into row i of two blocks the job names, just before and just after the
 * env's step, so the copies run in parallel and read each env's data at exactly the point Python's stack did. */
#include "ext.h"
#include "params.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*mj_fn)(const void *model, void *data);

/* An env's step in a job (its byte in start()'s mask). */
enum {
    PLAN_SKIP = 0,
    PLAN_GYMNASIUM = 1,      /* ctrl = its actions row; mj_step x nstep; mj_rnePostConstraint */
    PLAN_DMC_LEGACY = 2,     /* dm_control legacy_step: mj_step2; mj_step x (nstep - 1); mj_step1 */
    PLAN_DMC_LEGACY_RK4 = 3, /* dm_control legacy_step with the RK4 integrator: mj_step x nstep; mj_step1 */
    PLAN_DMC = 4,            /* dm_control without legacy_step: mj_step x nstep */
    PLAN_LAST = PLAN_DMC,
};

typedef struct {
    PyObject_HEAD
    mj_fn step, rne;
    mj_fn step1, step2;       /* NULL unless given (the dm_control plans need them) */
    void **models, **datas;
    double **ctrls;
    int n, nu, nstep, nthreads;
    pthread_t *threads;
    int started;              /* threads running */
    int sync_ready;           /* mu and done_cv are initialised */
    int ncv;                  /* wake_cv[0 .. ncv-1] are initialised */
    pthread_mutex_t mu;
    pthread_cond_t done_cv;   /* an env finished, or a thread went idle */
    /* the job: read by the threads after they see a new generation (under mu) */
    const double *actions;    /* (n, nu) float64 */
    const uint8_t *mask;      /* (n,) each env's plan (PLAN_SKIP: not stepped) */
    const int32_t *nsteps;    /* (n,) each env's nstep, or NULL: the constructor's nstep for all */
    char *before, *after;     /* the job's gather blocks, or NULL (see set_gather) */
    uint64_t generation;
    int active;               /* threads 0 .. active-1 take part in the job (start()'s active; the others sleep on) */
    atomic_int next_env;      /* the next env index a thread claims */
    int *finished;            /* env indices in the order they finished */
    int finished_count;       /* published (under mu) */
    atomic_int ready;         /* finished_count, also readable without mu: next()'s spin watches it */
    long spin_ns;             /* how long next() watches `ready` before it sleeps on done_cv (0: it sleeps at once) */
    pthread_cond_t *wake_cv;  /* one per thread: start() wakes only the threads of the job, and only those asleep */
    int *asleep;              /* thread t waits on wake_cv[t] (under mu) */
    struct WorkerSeat *seats_of; /* each thread's (stepper, index) */
    int consumed;             /* taken by next() */
    int expected;             /* envs the job steps */
    int busy_threads;         /* threads still on the job */
    int quit;
    /* the gather (set_gather): field f of env i is gsize[f] bytes at gsrc[i * nfields + f]; a block holds field
     * after field, each an (n, gsize[f]) C-contiguous array: row i of field f at block + n * goff[f] + i * gsize[f] */
    int nfields;
    const void **gsrc;
    size_t *gsize, *goff;
} Stepper;

static void copy_rows(const Stepper *s, char *block, int i) {
    for (int f = 0; f < s->nfields; ++f)
        memcpy(block + (size_t)s->n * s->goff[f] + (size_t)i * s->gsize[f], s->gsrc[(size_t)i * (size_t)s->nfields + f],
               s->gsize[f]);
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Env i's step of a job (its plan in mask[i]); returns 0 where the env is not stepped (its gather rows are then its
 * present state, as Python's stack gave). Runs in a physics thread, without mu. */
static int step_env(const Stepper *s, int i, const double *actions, const uint8_t *mask, const int32_t *nsteps,
                    char *before, char *after) {
    if (mask[i] == PLAN_SKIP) {
        if (before) copy_rows(s, before, i);
        if (after) copy_rows(s, after, i);
        return 0;
    }
    const void *m = s->models[i];
    void *d = s->datas[i];
    int nstep = nsteps ? nsteps[i] : s->nstep;
    switch (mask[i]) {
    case PLAN_GYMNASIUM:
        if (before) copy_rows(s, before, i); /* before ctrl is set: Python's stack came before start() */
        if (s->nu > 0) /* a model without actuators has no ctrl (NULL) and no actions row */
            memcpy(s->ctrls[i], actions + (size_t)i * (size_t)s->nu, (size_t)s->nu * sizeof(double));
        for (int k = 0; k < nstep; ++k) s->step(m, d);
        s->rne(m, d);
        if (after) copy_rows(s, after, i);
        break;
    case PLAN_DMC_LEGACY:
        s->step2(m, d);
        for (int k = 1; k < nstep; ++k) s->step(m, d);
        s->step1(m, d);
        break;
    case PLAN_DMC_LEGACY_RK4:
        for (int k = 0; k < nstep; ++k) s->step(m, d);
        s->step1(m, d);
        break;
    default: /* PLAN_DMC (start() let no other value through) */
        for (int k = 0; k < nstep; ++k) s->step(m, d);
        break;
    }
    return 1;
}

/* Env i is done: next() may hand it out. */
static void publish(Stepper *s, int i) {
    pthread_mutex_lock(&s->mu);
    s->finished[s->finished_count++] = i;
    atomic_store_explicit(&s->ready, s->finished_count, memory_order_release);
    pthread_mutex_unlock(&s->mu);
    pthread_cond_broadcast(&s->done_cv); /* after the unlock: the woken caller need not wait for mu */
}

struct WorkerSeat {
    Stepper *s;
    int t;
};

/* Thread t's loop. Threads 0 .. active-1 take part in a job, each sleeping between jobs on a condition variable
 * of its own, so start() wakes the job's threads and no other: a stepper of 16 threads stepping with 4 (the measured
 * choice of MujocoVectorEnv) used to wake all 16 every step, a futex wake each in the caller's thread. */
static void *worker(void *arg) {
    struct WorkerSeat *seat = arg;
    Stepper *s = seat->s;
    const int t = seat->t;
    uint64_t seen = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && s->generation == seen) {
            s->asleep[t] = 1;
            pthread_cond_wait(&s->wake_cv[t], &s->mu);
            s->asleep[t] = 0;
        }
        if (s->quit) break;
        seen = s->generation;
        if (t >= s->active) continue; /* not on this job: sleep until the next one */
        const double *actions = s->actions;
        const uint8_t *mask = s->mask;
        const int32_t *nsteps = s->nsteps;
        char *before = s->before, *after = s->after;
        pthread_mutex_unlock(&s->mu);
        /* Envs are claimed one at a time, so they finish roughly in index order and the render follows closely. */
        for (int i; (i = atomic_fetch_add(&s->next_env, 1)) < s->n;) {
            if (!step_env(s, i, actions, mask, nsteps, before, after)) continue;
            publish(s, i);
        }
        pthread_mutex_lock(&s->mu);
        if (--s->busy_threads == 0) pthread_cond_broadcast(&s->done_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void *address_of(PyObject *seq, Py_ssize_t i) {
    PyObject *item = PySequence_GetItem(seq, i);
    if (!item) return NULL;
    void *p = PyLong_AsVoidPtr(item);
    Py_DECREF(item);
    return p;
}

static void stepper_stop(Stepper *s) {
    if (!s->started) return;
    pthread_mutex_lock(&s->mu);
    while (s->busy_threads > 0) pthread_cond_wait(&s->done_cv, &s->mu);
    s->quit = 1;
    for (int t = 0; t < s->nthreads; ++t) pthread_cond_signal(&s->wake_cv[t]);
    pthread_mutex_unlock(&s->mu);
    for (int t = 0; t < s->nthreads; ++t) pthread_join(s->threads[t], NULL);
    s->started = 0;
}

GLT_PY_SIG(glt_sig_mujoco_stepper_new, "_MujocoStepper.__new__", {"step", GLT_PY_POSITIONAL, NULL, NULL},
           {"rne", GLT_PY_POSITIONAL, NULL, NULL}, {"models", GLT_PY_POSITIONAL, NULL, NULL},
           {"datas", GLT_PY_POSITIONAL, NULL, NULL}, {"ctrls", GLT_PY_POSITIONAL, NULL, NULL},
           {"nu", GLT_PY_POSITIONAL, NULL, NULL}, {"nstep", GLT_PY_POSITIONAL, NULL, NULL},
           {"threads", GLT_PY_POSITIONAL, NULL, NULL}, {"step1", GLT_PY_KEYWORD, "0", NULL},
           {"step2", GLT_PY_KEYWORD, "0", NULL});

static int stepper_setup(Stepper *s, PyObject *args, PyObject *kwargs) {
    PyObject *v[10];
    int nu = 0, nstep = 0, nthreads = 0;
    if (glt_py_parse_tuple(&glt_sig_mujoco_stepper_new, args, kwargs, v) < 0 ||
        glt_py_as_int(v[5], "nu", 0, INT_MAX, &nu) < 0 || glt_py_as_int(v[6], "nstep", 1, INT_MAX, &nstep) < 0 ||
        glt_py_as_int(v[7], "threads", 1, 256, &nthreads) < 0)
        return -1;
    PyObject *step_addr = v[0], *rne_addr = v[1], *models = v[2], *datas = v[3], *ctrls = v[4];
    Py_ssize_t n = PySequence_Size(models);
    if (n < 1 || n > (1 << 24) || PySequence_Size(datas) != n || PySequence_Size(ctrls) != n) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "_MujocoStepper: %zd models need as many datas and ctrls", n);
        return -1;
    }
    s->step = (mj_fn)PyLong_AsVoidPtr(step_addr);
    s->rne = (mj_fn)PyLong_AsVoidPtr(rne_addr);
    if (v[8]) s->step1 = (mj_fn)PyLong_AsVoidPtr(v[8]);
    if (v[9]) s->step2 = (mj_fn)PyLong_AsVoidPtr(v[9]);
    if (PyErr_Occurred()) return -1;
    if (!s->step || !s->rne) {
        PyErr_SetString(PyExc_ValueError, "_MujocoStepper: mj_step and mj_rnePostConstraint addresses must be set");
        return -1;
    }
    s->n = (int)n;
    s->nu = nu;
    s->nstep = nstep;
    s->nthreads = nthreads < (int)n ? nthreads : (int)n;
    s->models = calloc((size_t)n, sizeof(void *));
    s->datas = calloc((size_t)n, sizeof(void *));
    s->ctrls = calloc((size_t)n, sizeof(double *));
    s->finished = calloc((size_t)n, sizeof(int));
    s->threads = calloc((size_t)s->nthreads, sizeof(pthread_t));
    s->wake_cv = calloc((size_t)s->nthreads, sizeof(pthread_cond_t));
    s->asleep = calloc((size_t)s->nthreads, sizeof(int));
    s->seats_of = calloc((size_t)s->nthreads, sizeof(struct WorkerSeat));
    if (!s->models || !s->datas || !s->ctrls || !s->finished || !s->threads || !s->wake_cv || !s->asleep ||
        !s->seats_of) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        s->models[i] = address_of(models, i);
        s->datas[i] = address_of(datas, i);
        s->ctrls[i] = address_of(ctrls, i);
        if (PyErr_Occurred()) return -1;
        if (!s->models[i] || !s->datas[i] || (nu > 0 && !s->ctrls[i])) {
            PyErr_Format(PyExc_ValueError, "_MujocoStepper: env %zd has a null model, data or ctrl address", i);
            return -1;
        }
    }
    pthread_mutex_init(&s->mu, NULL);
    for (int t = 0; t < s->nthreads; ++t) {
        pthread_cond_init(&s->wake_cv[t], NULL);
        s->seats_of[t] = (struct WorkerSeat){s, t};
    }
    s->ncv = s->nthreads;
    pthread_cond_init(&s->done_cv, NULL);
    s->sync_ready = 1;
    for (int t = 0; t < s->nthreads; ++t) {
        if (pthread_create(&s->threads[t], NULL, worker, &s->seats_of[t]) != 0) {
            s->nthreads = t; /* the ones made are stopped by stepper_stop */
            s->started = t > 0;
            stepper_stop(s);
            PyErr_Format(PyExc_OSError, "_MujocoStepper: could not start physics thread %d", t);
            return -1;
        }
    }
    s->started = 1;
    return 0;
}

static PyObject *stepper_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Stepper *s = (Stepper *)alloc(type, 0);
    if (!s) return NULL;
    if (stepper_setup(s, args, kwargs) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static int job_running(Stepper *s) { return s->busy_threads > 0 || s->consumed < s->expected; }

static PyObject *stepper_start(PyObject *self, PyObject *args) {
    Stepper *s = (Stepper *)self;
    PyObject *actions_addr, *mask_addr, *nsteps_addr = NULL, *before_addr = NULL, *after_addr = NULL;
    int active = 0;
    if (!PyArg_ParseTuple(args, "OO|OOOi:start", &actions_addr, &mask_addr, &nsteps_addr, &before_addr, &after_addr,
                          &active))
        return NULL;
    if (active < 0 || active > s->nthreads) {
        PyErr_Format(PyExc_ValueError, "_MujocoStepper.start: active=%d threads, but this stepper has %d (0: all)",
                     active, s->nthreads);
        return NULL;
    }
    if (!s->started) {
        PyErr_SetString(PyExc_RuntimeError, "_MujocoStepper: closed");
        return NULL;
    }
    const double *actions = PyLong_AsVoidPtr(actions_addr);
    const uint8_t *mask = PyLong_AsVoidPtr(mask_addr);
    const int32_t *nsteps = nsteps_addr ? PyLong_AsVoidPtr(nsteps_addr) : NULL;
    char *before = before_addr ? PyLong_AsVoidPtr(before_addr) : NULL;
    char *after = after_addr ? PyLong_AsVoidPtr(after_addr) : NULL;
    if (PyErr_Occurred()) return NULL;
    if ((before || after) && s->nfields == 0) {
        PyErr_SetString(PyExc_ValueError, "_MujocoStepper.start: gather blocks given but set_gather() was not called");
        return NULL;
    }
    if (!mask) {
        PyErr_SetString(PyExc_ValueError, "_MujocoStepper.start: null mask");
        return NULL;
    }
    int expected = 0;
    for (int i = 0; i < s->n; ++i) {
        int plan = mask[i];
        if (plan > PLAN_LAST || (plan == PLAN_GYMNASIUM && !actions && s->nu > 0) ||
            ((plan == PLAN_DMC_LEGACY || plan == PLAN_DMC_LEGACY_RK4) && (!s->step1 || !s->step2))) {
            PyErr_Format(PyExc_ValueError,
                         "_MujocoStepper.start: env %d's plan %d is unknown or lacks what it needs (actions for "
                         "Gymnasium's, step1/step2 for dm_control's legacy step)", i, plan);
            return NULL;
        }
        if (nsteps && nsteps[i] < 0) {
            PyErr_Format(PyExc_ValueError, "_MujocoStepper.start: env %d's nstep is %d (negative)", i, nsteps[i]);
            return NULL;
        }
        expected += plan != PLAN_SKIP;
    }
    pthread_mutex_lock(&s->mu);
    if (job_running(s)) {
        pthread_mutex_unlock(&s->mu);
        PyErr_SetString(PyExc_RuntimeError, "_MujocoStepper.start: the previous step has not been waited for");
        return NULL;
    }
    s->actions = actions;
    s->mask = mask;
    s->nsteps = nsteps;
    s->before = before;
    s->after = after;
    s->finished_count = 0;
    atomic_store(&s->ready, 0);
    s->consumed = 0;
    s->expected = expected;
    atomic_store(&s->next_env, 0);
    s->active = active > 0 ? active : s->nthreads;
    s->busy_threads = s->active;
    s->generation++;
    /* Wake the job's threads that sleep (under mu: a thread not yet asleep sees the new generation before it
     * waits). */
    for (int t = 0; t < s->active; ++t)
        if (s->asleep[t]) pthread_cond_signal(&s->wake_cv[t]);
    pthread_mutex_unlock(&s->mu);
    Py_RETURN_NONE;
}

/* The next env whose physics finished (in finishing order), or None once every env of the job was taken. Where the
 * next env is not done yet, the caller first watches `ready` for up to spin_ns (no GIL held, no lock): a thread put
 * to sleep on done_cv wakes tens of µs after the broadcast on some hosts, and at small N every step waits here for
 * its first env. The spin is only a hint: what is returned is read under mu, as without it. */
static PyObject *stepper_next(PyObject *self, PyObject *unused) {
    Stepper *s = (Stepper *)self;
    int index = -1;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&s->mu);
    if (s->consumed < s->expected) {
        if (s->consumed >= s->finished_count && s->spin_ns > 0) {
            int want = s->consumed;
            long until = now_ns() + s->spin_ns;
            pthread_mutex_unlock(&s->mu);
            for (int k = 0; atomic_load_explicit(&s->ready, memory_order_acquire) <= want; ++k) {
                cpu_relax();
                if ((k & 63) == 63 && now_ns() > until) break;
            }
            pthread_mutex_lock(&s->mu);
        }
        while (s->consumed >= s->finished_count) pthread_cond_wait(&s->done_cv, &s->mu);
        index = s->finished[s->consumed++];
    }
    pthread_mutex_unlock(&s->mu);
    Py_END_ALLOW_THREADS
    if (index < 0) Py_RETURN_NONE;
    return PyLong_FromLong(index);
}

/* Waits until every thread is done with the job (the caller may then read every env's data); the envs not yet
 * taken by next() count as taken. */
static PyObject *stepper_wait(PyObject *self, PyObject *unused) {
    Stepper *s = (Stepper *)self;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&s->mu);
    while (s->busy_threads > 0) pthread_cond_wait(&s->done_cv, &s->mu);
    s->consumed = s->expected;
    pthread_mutex_unlock(&s->mu);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* set_gather(sources, sizes): the fields each env's thread copies into a job's gather blocks (see the top). sources:
 * n * F addresses (env-major), sizes: F byte counts. Only between jobs. Like the other addresses, these come from
 * gltensor's own code (MjData arrays that _physics.py keeps alive while this stepper exists). */
static PyObject *stepper_set_gather(PyObject *self, PyObject *args) {
    Stepper *s = (Stepper *)self;
    PyObject *sources, *sizes;
    if (!PyArg_ParseTuple(args, "OO:set_gather", &sources, &sizes)) return NULL;
    Py_ssize_t nf = PySequence_Size(sizes), ns = PySequence_Size(sources);
    if (nf < 0 || ns < 0) return NULL;
    if (nf < 1 || nf > 64 || ns != nf * s->n) {
        PyErr_Format(PyExc_ValueError, "_MujocoStepper.set_gather: %zd fields (1 to 64) need %zd sources, not %zd", nf,
                     nf * s->n, ns);
        return NULL;
    }
    const void **src = calloc((size_t)ns, sizeof(void *));
    size_t *size = calloc((size_t)nf, sizeof(size_t)), *off = calloc((size_t)nf, sizeof(size_t));
    if (!src || !size || !off) {
        free(src), free(size), free(off);
        return PyErr_NoMemory();
    }
    size_t total = 0;
    for (Py_ssize_t f = 0; f < nf; ++f) {
        PyObject *item = PySequence_GetItem(sizes, f);
        long long v = item ? PyLong_AsLongLong(item) : -1;
        Py_XDECREF(item);
        if (v <= 0 || v > (1LL << 30)) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "_MujocoStepper.set_gather: field %zd's size %lld", f, v);
            free(src), free(size), free(off);
            return NULL;
        }
        size[f] = (size_t)v;
        off[f] = total;
        total += (size_t)v;
    }
    for (Py_ssize_t k = 0; k < ns; ++k) {
        src[k] = address_of(sources, k);
        if (!src[k]) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "_MujocoStepper.set_gather: source %zd is null", k);
            free(src), free(size), free(off);
            return NULL;
        }
    }
    pthread_mutex_lock(&s->mu);
    int busy = job_running(s);
    if (!busy) {
        free(s->gsrc), free(s->gsize), free(s->goff);
        s->gsrc = src, s->gsize = size, s->goff = off, s->nfields = (int)nf;
    }
    pthread_mutex_unlock(&s->mu);
    if (busy) {
        free(src), free(size), free(off);
        PyErr_SetString(PyExc_RuntimeError, "_MujocoStepper.set_gather: a job is running");
        return NULL;
    }
    return PyLong_FromSize_t(total);
}

static PyObject *stepper_close(PyObject *self, PyObject *unused) {
    Stepper *s = (Stepper *)self;
    Py_BEGIN_ALLOW_THREADS
    stepper_stop(s);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static void stepper_dealloc(PyObject *self) {
    Stepper *s = (Stepper *)self;
    PyTypeObject *tp = Py_TYPE(self);
    stepper_stop(s); /* no thread may outlive the addresses it steps */
    if (s->sync_ready) {
        pthread_mutex_destroy(&s->mu);
        for (int t = 0; t < s->ncv; ++t) pthread_cond_destroy(&s->wake_cv[t]);
        pthread_cond_destroy(&s->done_cv);
    }
    free(s->models);
    free(s->datas);
    free(s->ctrls);
    free(s->finished);
    free(s->threads);
    free(s->wake_cv);
    free(s->asleep);
    free(s->seats_of);
    free(s->gsrc);
    free(s->gsize);
    free(s->goff);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *stepper_threads(PyObject *self, void *closure) { return PyLong_FromLong(((Stepper *)self)->nthreads); }

static PyObject *stepper_get_spin(PyObject *self, void *closure) {
    return PyLong_FromLong(((Stepper *)self)->spin_ns / 1000);
}

static int stepper_set_spin(PyObject *self, PyObject *value, void *closure) {
    Stepper *s = (Stepper *)self;
    int us = 0;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "_MujocoStepper.spin_us cannot be deleted");
        return -1;
    }
    if (glt_py_as_int(value, "spin_us", 0, 100000, &us) < 0) return -1;
    pthread_mutex_lock(&s->mu);
    s->spin_ns = (long)us * 1000L;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static PyMethodDef stepper_methods[] = {
    {"start", stepper_start, METH_VARARGS,
     "start(actions_address, mask_address[, nsteps_address]): step every env whose mask byte (its plan) is set, in "
     "the threads; returns at once. Plan 1: ctrl = its row of the float64 (n, nu) actions, mj_step nstep times, "
     "mj_rnePostConstraint; 2: mj_step2, mj_step nstep - 1 times, mj_step1; 3: mj_step nstep times, mj_step1; "
     "4: mj_step nstep times. nsteps: an int32 (n,) array of per-env nstep (default: the constructor's; 0: none). "
     "before, after: gather blocks (see set_gather) filled just before and just after each env's step (0: none). "
     "active: how many of the threads take part (0: all; the others sleep through the job)."},
    {"set_gather", stepper_set_gather, METH_VARARGS,
     "set_gather(sources, sizes) -> bytes per env: each env's thread copies field f (sizes[f] bytes at "
     "sources[i * F + f]) into its row of the job's gather blocks; a block is F C-contiguous (n, sizes[f]) arrays, "
     "one after another. Only between jobs."},
    {"next", stepper_next, METH_NOARGS, "next() -> the next finished env index, or None when all were taken."},
    {"wait", stepper_wait, METH_NOARGS, "wait(): until every thread is done with the job."},
    {"close", stepper_close, METH_NOARGS, "close(): stops the threads (after the job in flight); idempotent."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stepper_getset[] = {
    {"threads", stepper_threads, NULL, "the physics threads", NULL},
    {"spin_us", stepper_get_spin, stepper_set_spin,
     "how long next() watches for the next finished env before it sleeps (µs, 0 to 100000; 0: sleeps at once)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot stepper_slots[] = {
    {Py_tp_new, stepper_new},
    {Py_tp_dealloc, stepper_dealloc},
    {Py_tp_methods, stepper_methods},
    {Py_tp_getset, stepper_getset},
    {Py_tp_doc, "Private, for gltensor.mujoco._physics and gltensor.mujoco._dmc_physics: _MujocoStepper(step, rne, "
                "models, datas, ctrls, nu, nstep, threads, *, step1=0, step2=0) steps MuJoCo envs' physics in C "
                "threads without the GIL (mjstep.c)."},
    {0, NULL},
};

PyType_Spec glt_mujoco_stepper_spec = {
    .name = "gltensor._gltensor._MujocoStepper",
    .basicsize = sizeof(Stepper),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = stepper_slots,
};
