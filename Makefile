# gltensor: the two quick-start commands, and the C library for programs that do not use Python.
#   make demo   install what is missing, render + capture headless, print frames/s, save frame.png
#   make test   install what is missing, run the test suite
#   make lib    build/libgltensor.a and build/libgltensor.so (C API in include/gltensor.h)
# PYTHON: the Python to install into and run; unset, the bootstrap chooses (tools/choose_python.sh): an active
# virtual or conda environment's, else the clone's .venv.
PYTHON ?=
# The toolkit root: CUDA_HOME, else the one around nvcc on PATH, else /usr/local/cuda (nvcc may be a wrapper script).
CUDA_HOME ?= $(firstword $(foreach d,$(abspath $(dir $(realpath $(shell command -v nvcc 2>/dev/null)))/..) /usr/local/cuda,$(if $(wildcard $(d)/include/cuda_runtime_api.h),$(d),)))
NVCC ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCHS ?= 75 80 86 89 90
BUILD := build

# The bootstrap installs into the Python it chooses; tools/python.sh runs the same one. PYTHON is passed only when
# given, so that "not given" stays visible to both.
BOOTSTRAP = $(if $(PYTHON),PYTHON="$(PYTHON)" )./tools/bootstrap.sh
RUN_PYTHON = $(if $(PYTHON),PYTHON="$(PYTHON)" )./tools/python.sh

.PHONY: demo test bench lib clean check-header

demo:
	$(BOOTSTRAP)
	$(RUN_PYTHON) -m gltensor

test:
	$(BOOTSTRAP)
	$(RUN_PYTHON) -m pytest

bench:
	$(BOOTSTRAP)
	$(RUN_PYTHON) -m gltensor.bench single

# The core: one folder per concern (src/<folder>/, layered: tools/check_layers.py); headers named from src/.
CORE_SRC := $(wildcard src/*/*.c)
CORE_HDR := $(wildcard src/*/*.h)
CFLAGS_LIB := -std=c11 -O2 -fPIC -fvisibility=hidden -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
	-Werror=implicit-function-declaration -Iinclude -Isrc
ifneq ($(CUDA_HOME),)
CFLAGS_LIB += -DGLT_WITH_CUDA -I$(CUDA_HOME)/include
KERNEL_OBJ := $(BUILD)/cuda/cuda_kernels.o
LINK_CUDA := -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -lstdc++
endif
CORE_OBJ := $(patsubst src/%.c,$(BUILD)/%.o,$(CORE_SRC)) $(KERNEL_OBJ)

lib: $(BUILD)/libgltensor.a $(BUILD)/libgltensor.so

# build/<folder>/<file>.o, as in src/ (the archive keeps file names only; they are unique across folders).
$(BUILD)/%.o: src/%.c $(CORE_HDR) include/gltensor.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(BUILD)/cuda/cuda_kernels.o: src/cuda/cuda_kernels.cu src/cuda/kernels.h src/convert/pixel_codes.h src/convert/write_convert.h
	@mkdir -p $(dir $@)
	$(NVCC) -c -O3 -std=c++17 -Isrc -Xcompiler -fPIC,-fvisibility=hidden $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
	    -gencode=arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS)) $< -o $@

$(BUILD)/libgltensor.a: $(CORE_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/libgltensor.so: $(CORE_OBJ)
	$(CC) -shared -o $@ $^ $(LINK_CUDA) -ldl -lpthread -lm -Wl,--exclude-libs,ALL -Wl,-Bsymbolic

check-header:
	printf '#include "gltensor.h"\nint main(void){return glt_status_name(GLT_OK)[0]=='"'"'G'"'"'?0:1;}\n' > $(BUILD)/hdr.c
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -fsyntax-only $(BUILD)/hdr.c
	$(CXX) -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -fsyntax-only -x c++ $(BUILD)/hdr.c

clean:
	rm -rf $(BUILD) python/gltensor/_gltensor*.so *.egg-info python/*.egg-info
