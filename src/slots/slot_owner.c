/*
 * One writer per slot. The seqlock of slots_shared.h assumes it: with two writers of one record, the first to end
 * makes the sequence even while the other still copies, and the trainer takes half of one image and half of the
 * other for a fresh frame (a review's two processes holding one handle tore 34 of them in a run).
 *
 * So a writer takes its slot at attach: a compare-exchange of the record's owner word from free (0), or from a
 * writer whose process is gone, to its own (start time << 22 | pid: a reused pid has another start time). It is
 * refused with GLT_SLOTS_BUSY, naming the holder, while that process runs; the holder releases the slot when its
 * writer is destroyed, and a slot whose writer died (SIGKILL included) is taken over by the next one (a restarted
 * worker). Inside one process a registry keyed by the slot's memfd refuses a second writer object of the same slot,
 * since the owner word names processes only.
 *
 * The word lives in memory the slot's worker can write: a wild write or a punched hole (fallocate) can clear it or
 * name anything. An attached writer therefore puts its word back at every write (glt_slot_owner_keep); what such a
 * worker can break by it is its own slot, which it can already fill with anything.
 */
#include "slots/slots_shared.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PID_BITS 22 /* PID_MAX_LIMIT is 2^22: every pid fits */
#define PID_MASK ((1ull << PID_BITS) - 1)

uint64_t glt_slot_owner_word(int pid, uint64_t start) {
    /* 42 bits of clock ticks since boot: 1.4 billion years at 100 Hz. */
    return (start & ((1ull << (64 - PID_BITS)) - 1)) << PID_BITS | ((uint64_t)pid & PID_MASK);
}

int glt_slot_owner_pid(uint64_t word) { return (int)(word & PID_MASK); }

int glt_slot_owner_alive(uint64_t word) {
    int pid = glt_slot_owner_pid(word);
    return pid > 0 && glt_process_running(pid, word >> PID_BITS);
}

glt_status glt_slot_owner_take(glt_slot_record *rec, unsigned slot, uint64_t mine, int inherited) {
    uint64_t seen = atomic_load_explicit(&rec->owner, memory_order_acquire);
    for (int tries = 0; tries < 64; ++tries) {
        if (seen == mine) return GLT_OK; /* this process's (a registry entry of its own said it is free here) */
        if (seen && glt_slot_owner_alive(seen)) {
            int pid = glt_slot_owner_pid(seen);
            int parent = pid == (int)getppid();
            return glt_fail(GLT_SLOTS_BUSY,
                            "shared slot %u already has a writer: pid %d%s, which still runs; one process writes each "
                            "slot (two writers would tear its images). %s",
                            slot, pid, parent ? " (this process's parent)" : "",
                            inherited ? "This process inherited that writer through fork: write from one of the two "
                                        "processes only (close the parent's writer first, SlotHandle.close()), or "
                                        "give the child a slot of its own"
                                      : "Close that writer first (SlotHandle.close() in that process), or give this "
                                        "process a slot of its own; a writer whose process exited is taken over");
        }
        /* Free, or its writer exited (or the word is not a live writer's at all): take it. */
        if (atomic_compare_exchange_weak_explicit(&rec->owner, &seen, mine, memory_order_acq_rel,
                                                  memory_order_acquire))
            return GLT_OK;
    }
    return glt_fail(GLT_SLOTS_BUSY,
                    "shared slot %u: its writer lock kept changing while this process tried to take it (another "
                    "process holding the slot's memory writes its record); one process writes each slot",
                    slot);
}

void glt_slot_owner_keep(glt_slot_record *rec, uint64_t mine) {
    if (atomic_load_explicit(&rec->owner, memory_order_relaxed) != mine)
        atomic_store_explicit(&rec->owner, mine, memory_order_release);
}

void glt_slot_owner_release(glt_slot_record *rec, uint64_t mine) {
    uint64_t expected = mine;
    atomic_compare_exchange_strong_explicit(&rec->owner, &expected, 0, memory_order_release, memory_order_relaxed);
}

/* The writers attached in this process, by slot memfd. Few (one per slot a process writes): a list. */
typedef struct attached {
    uint64_t dev, ino;
    struct attached *next;
} attached;
static attached *registry;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

int glt_slot_owner_register(uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&registry_lock);
    int ok = 1;
    for (attached *a = registry; a; a = a->next)
        if (a->dev == dev && a->ino == ino) ok = 0;
    if (ok) {
        attached *a = malloc(sizeof *a);
        if (a) {
            a->dev = dev;
            a->ino = ino;
            a->next = registry;
            registry = a;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return ok;
}

void glt_slot_owner_unregister(uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&registry_lock);
    for (attached **p = &registry; *p; p = &(*p)->next)
        if ((*p)->dev == dev && (*p)->ino == ino) {
            attached *a = *p;
            *p = a->next;
            free(a);
            break;
        }
    pthread_mutex_unlock(&registry_lock);
}
