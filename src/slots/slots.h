/* What the CPython extension asks of shared slots beyond gltensor.h: whether this GL context can write CUDA slots,
 * and the hooks its tests use. The slots' own protocol is in slots_shared.h. */
#ifndef GLT_SLOTS_H
#define GLT_SLOTS_H

#include "core/core.h"

/* ---- slot_writer.c ---- */
/* GLT_OK where the current GL context can write CUDA shared slots (GL_EXT_memory_object_fd). */
glt_status glt_slot_writer_gl_supported(void);

/* slot_writer.c, for tests only (_gltensor._slots_fail_next_write_for_testing): the next GL write into a shared slot
 * in this process fails as a GL error in its copy would, after the slot was marked being written. */
void glt_slot_writer_fail_next_write_for_testing(void);

/* slots.c, for tests only (_gltensor._closed_slots_alive_for_testing): the trainer's slots objects of this process
 * destroyed but not yet freed (a zero-copy view still holds them). */
int glt_slots_closed_alive_for_testing(void);
/* slots.c, for tests only (_gltensor._slots_weak_control_for_testing): slots made while on leave their control page
 * unsealed against other processes' writes, as on a kernel before Linux 5.1 (the trainer's recovery is tested so). */
void glt_slots_weak_control_for_testing(int on);

#endif
