/* The core's private declarations the extension uses beyond gltensor.h, from the src/ folders that own them: GL's
 * entry points and context handles (gltiles.c, glcontext.c), the environment check (env.c), the depth probe, the
 * CUDA queries and the shared slots' hooks that the doctor and the tests reach (module.c). The extension sits above
 * every folder of src/ (tools/check_layers.py); nothing in src/ includes this. */
#ifndef GLT_EXT_INTERNAL_H
#define GLT_EXT_INTERNAL_H

#include "core/core.h"
#include "cuda/cuda_api.h"
#include "gl/gl.h"
#include "read/gl_stage.h"
#include "slots/slots.h"

#endif
