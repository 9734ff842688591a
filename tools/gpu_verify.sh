#!/usr/bin/env bash
# Runs on the GPU machine (the device tool), from the repository root, what CI cannot: the build with the
# CUDA backend, the full suite (GPU tests included) and the benchmarks. Logs and JSON go to $OUT.
#   bash tools/gpu_verify.sh STEP...   (bg:STEP runs one in the background; wait waits for it)  steps: firstcontact docs tests bench-ab procs procs-ab slots memcheck-slots trust memcheck-trust faults vecenvs bench convert suite quick quickclears depth engines panda3d mujoco
#                                      upload memcheck-upload (tensor -> GL, issue 15)
#                                      mujoco-batch (issue 33: BatchRenderer tiles == Renderer.render(), N to 256)
#                                      memcheck-mujoco (the MuJoCo batch's CUDA reads and vector env under memcheck)
#                                      dmc-threads (DmControlBatch's threaded physics: tests, bench dmc)
#                                      mujoco-round (the MuJoCo/TorchRL tests on CUDA, then bench mujoco, dmc, torchrl;
#                                      also as round-tests round-mujoco round-dmc round-torchrl), phases, ppo-torchrl
#                                      mjfix (the review's six MuJoCo defects, their tests on CUDA)
#                                      mujoco-auto (every v5 task: batched path against per-env, N = 4 and 64)
#                                      docs (every python block of README.md and docs/*.md on CUDA, no MUJOCO_GL,
#                                      PYOPENGL_PLATFORM or DISPLAY set)
#                                      torchrl (gltensor.torchrl tests on CUDA, the TorchRL PPO example, its bench)
#                                      multigpu scaling memcheck-multigpu (these three need 2+ GPUs)
#                                      multinode (two torchrun "nodes" on this host; one GPU is enough)
#                                      reliability soak memcheck racecheck synccheck (issue 14; one per call)
#                                      slots3 memcheck-slots3 (shared slots, round 3: sealed memfds, one writer per slot)
# Carry `.gl` (GL loader packages, see the device tool's README) and, for `engines`, `.whl` with the
# engines' cp312 wheels. They do not fit one call (64 MiB): panda3d alone is 54 MB, so carry it in one
# call and mujoco + mujoco-core + mujoco-studio + glfw + moderngl + glcontext (23 MB) in another.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gltensor-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export PYTHONUNBUFFERED=1
# A clean build every time: a warm machine keeps ignored build outputs and earlier wheels between calls.
rm -rf build benchmarks/c/build examples/c/build python/gltensor/_gltensor*.so /tmp/site
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
nvidia-smi -L
GLTENSOR_CUDA_ARCHS=${GLTENSOR_CUDA_ARCHS:-90} python3 -m pip install --no-build-isolation --no-deps -e . \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
run_step() {
    local step=$1
    case "$step" in
    tests) # xdist restarts a worker that crashes, so one crash cannot hide the rest of the run. TESTS_WORKERS
           # (default 1) runs the tests that bound no global figure in parallel; the slow ones (the soak samples
           # the whole device's free memory) then run alone, and whatever failed is run once more alone
           # (--lf), both results printed: a test that fails only beside others is named, not hidden.
        n=${TESTS_WORKERS:-1}
        timeout ${TESTS_TIME:-300} python3 -m pytest -q -n "$n" --max-worker-restart 20 -rfEs -m "not slow and not alone" \
            > "$OUT/pytest.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -40
        timeout 150 python3 -m pytest -q -rfEs -m "slow or alone" > "$OUT/pytest_slow.log" 2>&1
        echo "slow and alone: $(grep -E "passed|failed" "$OUT/pytest_slow.log" | tail -1)"
        if grep -qE "^(FAILED|ERROR)" "$OUT/pytest.log"; then
            timeout 90 python3 -m pytest -q -rfEs --lf -m "not slow and not alone" > "$OUT/pytest_rerun.log" 2>&1
            echo "failed ones again, alone:"; grep -E "^(FAILED|ERROR)|passed|failed|^E  " "$OUT/pytest_rerun.log" | tail -30
        fi
        grep -E "^SKIPPED" "$OUT/pytest.log" | sed -E 's/^SKIPPED \[[0-9]+\] //' | cut -c1-150 | sort | uniq -c | sort -rn | head -25 ;;
    firstcontact) # issue 35: the CUDA side of the first-contact items: frames copied on CUDA's legacy default
           # stream (frame.stream == 1), OpenCV's GpuMat over a CUDA frame (skipped unless this OpenCV has CUDA),
           # the doctor and the CUDA advice, dtype 'float' refused; then the bootstrap twice (PIP_NO_INDEX: no
           # network here), the second run must say "no rebuild" within seconds
        timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_opencv.py tests/test_doctor.py \
            "tests/test_gpu.py::test_cuda_properties" tests/test_convert.py -k "not test_capture_conversions and not \
            test_every_16bit_value" > "$OUT/firstcontact.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/firstcontact.log" | tail -20
        # PYTHON=python3: this machine's Python, which holds the packages (without it the bootstrap makes .venv)
        PYTHON=python3 PIP_NO_INDEX=1 timeout 400 ./tools/bootstrap.sh > "$OUT/bootstrap1.log" 2>&1; echo "bootstrap 1 exit $?"
        s=$(date +%s.%N); PYTHON=python3 PIP_NO_INDEX=1 timeout 100 ./tools/bootstrap.sh > "$OUT/bootstrap2.log" 2>&1
        echo "bootstrap 2 exit $? in $(echo "$(date +%s.%N) - $s" | bc) s"; grep -E "rebuild|building|gltensor 0" "$OUT/bootstrap2.log" ;;
    procs) # issue 21: many engine processes, one GPU batch (host readback per worker, gltensor per worker,
           # shared slots, the floor, the pack path, one-process Atlas) for PROCS_WORKERS x PROCS_SIZES
        timeout ${PROCS_TIME:-420} python3 -m gltensor.bench procs --workers "${PROCS_WORKERS:-1,4,8,16,64}" \
            ${PROCS_PATHS:+--paths "$PROCS_PATHS"} \
            --sizes "${PROCS_SIZES:-84,256,512}" --steps "${PROCS_STEPS:-200}" --max-seconds "${PROCS_SECONDS:-1.0}" \
            --json "$OUT/procs.json" > "$OUT/procs.log" 2>&1; echo "procs exit $?"
        grep -v "^  " "$OUT/procs.log" | tail -60 ;;
    slots) # issue 21: the shared-slot tests on both backends and both write paths (every pixel, every format),
           # the vector-env tests, then the procs cells with the shader write and the copy write in the same run
        timeout 300 python3 -m pytest -q -rfEs -n ${TESTS_WORKERS:-4} -m "not alone" tests/test_slots.py \
            tests/test_slot_views.py tests/test_gymnasium_slots.py tests/test_sb3_slots.py > "$OUT/slots_tests.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/slots_tests.log" | tail -30
        timeout 120 python3 -m pytest -q -rfEs -m alone tests/test_slots.py > "$OUT/slots_tests_alone.log" 2>&1
        echo "alone: $(grep -E "passed|failed" "$OUT/slots_tests_alone.log" | tail -1)"
        for b in ${PROCS_BUFFERS:-3}; do  # SharedSlots(buffers=b), one run each
            timeout ${PROCS_TIME:-300} python3 -m gltensor.bench procs --workers "${PROCS_WORKERS:-4,16}" \
                --sizes "${PROCS_SIZES:-84,256,512}" --paths "${PROCS_PATHS:-host,slots,slots_copy,floor,pack}" \
                --slot-buffers "$b" --steps "${PROCS_STEPS:-150}" --max-seconds "${PROCS_SECONDS:-0.5}" \
                --json "$OUT/procs_slots_b$b.json" > "$OUT/procs_slots_b$b.log" 2>&1; echo "procs (buffers=$b) exit $?"
            grep -A9 "^µs per step, every path" "$OUT/procs_slots_b$b.log"
        done ;;
    readcost) # issue 21: the trainer's read of shared slots alone (tools/slots_read_cost.py) at two sizes
        for c in "4 84" "16 512"; do read -r cnt side <<< "$c"
            timeout 90 python3 tools/slots_read_cost.py --count "$cnt" --size "$side" 2>&1 | tail -14 | tee -a "$OUT/readcost.log"; done ;;
    memcheck-slots) # the trainer's side of the CUDA slots (VMM allocation, gather kernel, events) under memcheck
        GLTENSOR_UNDER_SANITIZER=1 timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
            --log-file "$OUT/memcheck_slots.txt" python3 -m pytest -q -p no:cacheprovider -k "(cuda and (every_pixel or RGBA16F or callers or never_overwritten or view)) or frees_the_device or dead_views" tests/test_slots.py tests/test_slot_views.py \
            > "$OUT/memcheck_slots.log" 2>&1; echo "memcheck-slots: exit $? (99: the tool found errors)"
        tail -2 "$OUT/memcheck_slots.log"; grep -E "ERROR SUMMARY|LEAK SUMMARY" "$OUT/memcheck_slots.txt" | tail -3 ;;
    trust) # issue 34 on the CUDA backend: the torn-frame race (copies for TRUST_RACE_COPIES s, views for
           # TRUST_RACE_VIEWS s: 5 minutes together), then the fuzz of what a worker can write (100,000 mutations)
        GLTENSOR_RACE_SECONDS=${TRUST_RACE_COPIES:-210} timeout 330 python3 -m pytest -q -s -rfEs -p no:cacheprovider \
            -k "cuda and copies" tests/test_slots_race.py > "$OUT/trust_race_copies.log" 2>&1
        GLTENSOR_RACE_SECONDS=${TRUST_RACE_VIEWS:-90} timeout 210 python3 -m pytest -q -s -rfEs -p no:cacheprovider \
            -k "cuda and views" tests/test_slots_race.py > "$OUT/trust_race_views.log" 2>&1
        grep -hE "^(copies|views):|^(FAILED|ERROR)|passed|failed" "$OUT"/trust_race_*.log
        GLTENSOR_FUZZ_MUTATIONS=${TRUST_MUTATIONS:-100000} timeout 300 python3 -m pytest -q -s -rfEs -p no:cacheprovider \
            -k cuda tests/test_slots_trust.py > "$OUT/trust_fuzz.log" 2>&1
        grep -E "mutations|^(FAILED|ERROR)|passed|failed" "$OUT/trust_fuzz.log" | tail -10 ;;
    memcheck-trust) # issue 34: the fuzz and a short race on the CUDA backend under memcheck (the trainer's reads
                    # of slots whose records and pixels a worker garbled)
        GLTENSOR_UNDER_SANITIZER=1 GLTENSOR_FUZZ_MUTATIONS=${TRUST_MUTATIONS:-2000} GLTENSOR_RACE_SECONDS=10 \
            timeout ${MEMCHECK_TIME:-420} compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
            --log-file "$OUT/memcheck_trust.txt" python3 -m pytest -q -s -p no:cacheprovider -k cuda \
            tests/test_slots_trust.py tests/test_slots_race.py > "$OUT/memcheck_trust.log" 2>&1
        echo "memcheck-trust: exit $? (99: the tool found errors)"
        grep -E "mutations|^(copies|views):|passed|failed" "$OUT/memcheck_trust.log" | tail -6
        grep -E "ERROR SUMMARY|LEAK SUMMARY" "$OUT/memcheck_trust.txt" | tail -3 ;;
    vecenvs) # issue 21: the two vector-env examples end to end on the CUDA backend (train, then SB3's bench)
        timeout 150 python3 examples/gymnasium_slots.py --envs 4 --size 64 --steps 200 --backend cuda \
            > "$OUT/gymnasium_slots.log" 2>&1; echo "gymnasium_slots exit $?"; tail -6 "$OUT/gymnasium_slots.log"
        timeout 150 python3 examples/sb3_slots.py --envs 4 --size 64 --timesteps 256 --backend cuda \
            > "$OUT/sb3_slots.log" 2>&1; echo "sb3_slots exit $?"; tail -6 "$OUT/sb3_slots.log"
        for size in ${SB3_SIZES:-84}; do  # the stock SubprocVecEnv, SlotVecEnv on host slots and on CUDA slots
            timeout 240 python3 examples/sb3_slots.py --bench --envs-list 4 16 --size $size --steps 100 \
                --json "$OUT/sb3_bench_$size.json" > "$OUT/sb3_bench_$size.log" 2>&1; echo "sb3 bench ${size}² exit $?"
            grep "^|" "$OUT/sb3_bench_$size.log"
        done ;;
    bench)
        (make lib CUDA_ARCHS=90 && make -C benchmarks/c) > "$OUT/make.log" 2>&1
        timeout 200 python3 -m gltensor.bench single --json "$OUT/single.json" > "$OUT/single.log" 2>&1; tail -28 "$OUT/single.log"
        timeout 200 python3 -m gltensor.bench batch --json "$OUT/batch.json" > "$OUT/batch.log" 2>&1; tail -30 "$OUT/batch.log"
        timeout 150 python3 -m gltensor.bench convert --json "$OUT/convert.json" > "$OUT/convert.log" 2>&1; tail -40 "$OUT/convert.log" ;;
    suite) # the full grid of issue #6 with its defaults; the time limit keeps it inside one device call
           # (10 minutes, the build included): cells it could not start are listed as skipped for time
        timeout 535 python3 -m gltensor.bench --time-limit 470 \
            --json "$OUT/suite.json" --plot "$OUT/suite.png" > "$OUT/suite.log" 2>&1
        echo "Panda3D GL errors in the suite: $(grep -c 'GL error' "$OUT/suite.log")"
        grep -E "^\[[0-9]+/[0-9]+\]" "$OUT/suite.log" | tr '\n' ' '; echo
        grep -v "glgsg(error)" "$OUT/suite.log" | tail -45 ;;
    quickclears) # the quick grid with the probes' clears instead of the pattern draw (render cost compared)
        timeout 120 python3 -m gltensor.bench --quick --no-progress --draw clears --json "$OUT/quick_clears.json" \
            --plot "$OUT/quick_clears.png" > "$OUT/quick_clears.log" 2>&1
        grep -v "glgsg(error)" "$OUT/quick_clears.log" | grep -E "render only|gltensor (single|Batch|Atlas)|cuda-python|usually|Headline|vs " | head -40 ;;
    convert)
        timeout 200 python3 -m gltensor.bench convert --json "$OUT/convert.json" > "$OUT/convert.log" 2>&1; tail -45 "$OUT/convert.log" ;;
    procs-ab) # issue 34: what trust costs the trainer: `bench procs` (host readback, the shared slots with their
              # shader and copy writes, the floor) of the commit before the round (.base/base.tar.gz, a `git archive`
              # of it, carried) and of this tree, alternated in one call (before, after, before, after)
        rm -rf /tmp/base_tree && mkdir -p /tmp/base_tree && tar xzf .base/base.tar.gz -C /tmp/base_tree
        GLTENSOR_CUDA_ARCHS=${GLTENSOR_CUDA_ARCHS:-90} python3 -m pip install -q --no-build-isolation --no-deps --no-compile \
            --target /tmp/site_base /tmp/base_tree > "$OUT/build_base.log" 2>&1 || { tail -20 "$OUT/build_base.log"; exit 1; }
        for r in ${AB_RUNS:-1 2}; do for which in before after; do
            if [ "$which" = before ]; then pp=/tmp/site_base${PYTHONPATH:+:$PYTHONPATH}; else pp=${PYTHONPATH:-}; fi
            PYTHONPATH=$pp timeout ${PROCS_TIME:-150} python3 -m gltensor.bench procs --workers "${PROCS_WORKERS:-4,16}" \
                --sizes "${PROCS_SIZES:-84,512}" --paths "${PROCS_PATHS:-host,slots,slots_copy,floor}" \
                --steps "${PROCS_STEPS:-150}" --max-seconds "${PROCS_SECONDS:-0.5}" --json "$OUT/procs_${which}_$r.json" \
                > "$OUT/procs_${which}_$r.log" 2>&1; echo "procs $which $r exit $?"
            grep -A9 "^µs per step, every path" "$OUT/procs_${which}_$r.log"
        done; done ;;
    bench-ab) # issue 25: `python -m gltensor.bench --quick` of the build before the refactor (.before/, a tree of
              # that commit, carried) and of this tree, alternated in one call (before, after, before, after)
        GLTENSOR_CUDA_ARCHS=${GLTENSOR_CUDA_ARCHS:-90} python3 -m pip install -q --no-build-isolation --no-deps --no-compile \
            --target /tmp/site_before ./.before > "$OUT/build_before.log" 2>&1 || { tail -20 "$OUT/build_before.log"; exit 1; }
        for r in ${AB_RUNS:-1 2}; do for which in before after; do
            if [ "$which" = before ]; then pp=/tmp/site_before${PYTHONPATH:+:$PYTHONPATH}; else pp=${PYTHONPATH:-}; fi
            PYTHONPATH=$pp timeout 150 python3 -c "import gltensor; print('$which', gltensor.__file__)"
            PYTHONPATH=$pp timeout 150 python3 -m gltensor.bench --quick --no-progress --json "$OUT/quick_${which}_$r.json" \
                --plot "$OUT/quick_${which}_$r.png" > "$OUT/quick_${which}_$r.log" 2>&1; echo "quick $which $r exit $?"
        done; done
        python3 tools/bench_ab.py --before "$OUT"/quick_before_*.json --after "$OUT"/quick_after_*.json \
            --json "$OUT/bench_ab.json" | tee "$OUT/bench_ab.log" ;;
    quick)
        timeout 120 python3 -m gltensor.bench --quick --no-progress --json "$OUT/suite_quick.json" --plot "$OUT/suite_quick.png" > "$OUT/suite_quick.log" 2>&1
        tail -40 "$OUT/suite_quick.log" ;;
    depth) # the compute-shader depth path (the CUDA default where exact): the driver check and exactness
           # (tests/test_depth.py), with the default choice and with the pixel-pack copy forced; speed:
           # python -m gltensor.bench convert (`convert` step)
        python3 -c "import gltensor; ctx = gltensor.Context.headless(); print('compute depth path exact on this driver:', gltensor._gltensor._depth_compute_exact())" | tee "$OUT/depth.log"
        timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_depth.py tests/test_msaa.py > "$OUT/depth_default.log" 2>&1
        tail -1 "$OUT/depth_default.log"
        GLTENSOR_DEPTH_PATH=readpixels timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_depth.py tests/test_msaa.py > "$OUT/depth_tests.log" 2>&1
        tail -3 "$OUT/depth_tests.log" ;;
    panda3d) # Panda's default PRC and configure(), a subprocess each: getRamImage, MetaDrive's recipe, gltensor
        timeout 240 python3 -m gltensor.bench panda3d --json "$OUT/panda3d.json" > "$OUT/panda3d.log" 2>&1; tail -60 "$OUT/panda3d.log" ;;
    mujoco) # issue 33: pixel RL on MuJoCo, env-steps/s end to end (python -m gltensor.bench mujoco): AsyncVectorEnv,
            # SyncVectorEnv, shared slots, MujocoVectorEnv, dm_control stock vs DmControlBatch, the render floor;
            # then the vector env's tests and the example on the CUDA backend. Needs the wheels of mujoco,
            # gymnasium, dm_control and their dependencies in .whl. MUJOCO_ENVS, MUJOCO_STEPS, MUJOCO_ROUNDS,
            # MUJOCO_VISUALS change the run (~6-8 minutes at the defaults).
        MUJOCO_GL=egl timeout 150 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_mujoco_vector.py \
            > "$OUT/mujoco_tests.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/mujoco_tests.log" | tail -8
        MUJOCO_GL=egl timeout 60 python3 examples/mujoco_batch_ppo.py --envs 16 --steps 256 > "$OUT/mujoco_ppo.log" 2>&1
        echo "example rc $?: $(tail -1 "$OUT/mujoco_ppo.log")"
        MUJOCO_GL=egl timeout 540 python3 -m gltensor.bench mujoco --envs "${MUJOCO_ENVS:-1,4,16,64}" \
            --visuals "${MUJOCO_VISUALS:-default,light}" --steps "${MUJOCO_STEPS:-50}" --rounds "${MUJOCO_ROUNDS:-3}" \
            --json "$OUT/mujoco.json" > "$OUT/mujoco.log" 2>&1; echo "bench rc $?"
        tail -45 "$OUT/mujoco.log" ;;
    mujoco-auto) # the automatic path choice, measured: every v5 task on the batched path and on the per-env path it
                 # replaces, light visuals, N = 4 and 64 (MUJOCO_ENVS); the note column gives batch / batch-per-env
                 # and marks a slower batched path SLOWER. About 4 minutes.
        MUJOCO_GL=egl timeout ${AUTO_TIME:-300} python3 -m gltensor.bench mujoco --envs "${MUJOCO_ENVS:-4,64}" \
            --visuals light --steps "${MUJOCO_STEPS:-25}" --rounds "${MUJOCO_ROUNDS:-3}" --task v5 --dm-task "" \
            --paths batch,batch-per-env --json "$OUT/mujoco_auto.json" > "$OUT/mujoco_auto.log" 2>&1
        echo "bench rc $?"; grep -E -- "-v5 .*batch " "$OUT/mujoco_auto.log" | tail -30 ;;
    mujoco-tasks) # the batched task physics: every v5 task in both autoreset modes against Gymnasium's own envs
                  # (1,000 steps each), the vector env's tests (pixels, the batched path being the default) on CUDA
        MUJOCO_GL=egl timeout ${TASKS_TIME:-300} python3 -m pytest -q -p no:cacheprovider -rfEs -n ${TESTS_WORKERS:-8} \
            tests/test_mujoco_tasks.py tests/test_mujoco_vector.py > "$OUT/mujoco_tasks.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|^E  " "$OUT/mujoco_tasks.log" | tail -30 ;;
    mjfix) # the review's six MuJoCo defects on the CUDA backend and NVIDIA's EGL: an env rendering in its own step()
           # (its pixels and the batch's), height fields followed per env, the caller's GL context after close()
           # and garbage collection, no physics thread at work after a raise. Needs the mujoco and gymnasium
           # wheels; dm_control and stable-baselines3 tests skip without theirs.
        MUJOCO_GL=egl timeout ${MJFIX_TIME:-240} python3 -m pytest -q -p no:cacheprovider -rfEs \
            tests/test_mujoco_defects.py > "$OUT/mjfix.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|^E  " "$OUT/mjfix.log" | tail -30 ;;
    tileprofile) # where a BatchRenderer tile's time goes (exact against viewport tiling, blits, round-robin
                 # contexts) and the batched physics per thread count (tools/mujoco_tile_profile.py)
        MUJOCO_GL=egl timeout ${PROFILE_TIME:-240} python3 tools/mujoco_tile_profile.py --envs "${PROFILE_ENVS:-64,256}" --threads "${PROFILE_THREADS:-4,16}" \
            --json "$OUT/tile_profile.json" 2>&1 | grep -v settotalmass | grep -v "^$" | tee "$OUT/tile_profile.log" ;;
    mujoco-fast) # pixel RL at the renderer's floor: the batched path beside both floors (physics: mujoco.rollout and
                 # the path's own threads; render: the bare render and render+read), the per-env path and
                 # AsyncVectorEnv, light visuals, N = 4..256 (MUJOCO_ENVS, MUJOCO_STEPS, MUJOCO_ROUNDS, MUJOCO_TASK)
        MUJOCO_GL=egl timeout ${FAST_TIME:-420} python3 -m gltensor.bench mujoco --envs "${MUJOCO_ENVS:-4,16,64,256}" \
            --visuals "${MUJOCO_VISUALS:-light}" --steps "${MUJOCO_STEPS:-50}" --rounds "${MUJOCO_ROUNDS:-3}" \
            --task "${MUJOCO_TASK:-HalfCheetah-v5}" --dm-task "${MUJOCO_DM_TASK:-}" \
            --paths "${MUJOCO_PATHS:-async,batch,batch-per-env,physics,rollout,render,render+read,pixels}" \
            --json "$OUT/mujoco_fast.json" > "$OUT/mujoco_fast.log" 2>&1; echo "bench rc $?"
        grep -v settotalmass "$OUT/mujoco_fast.log" | grep -v "^$" | tail -40 ;;
    final-round) # one call for the round's GPU figures: the CUDA two-writer race of the shared slots (FINAL_RACE s,
                 # the 5-minute target) with the TorchRL PPO example beside it (its loss, not its speed, is what
                 # counts), then, alone, the MuJoCo benchmark (batched path beside its floors) and TorchRL's
        (GLTENSOR_RACE_SECONDS=${FINAL_RACE:-300} timeout $(( ${FINAL_RACE:-300} + 60 )) python3 -m pytest -q -s -rfEs \
            -p no:cacheprovider -k cuda tests/test_slots_two_writers.py > "$OUT/slots3_race.log" 2>&1
         echo "race exit $?" >> "$OUT/slots3_race.log") &
        MUJOCO_GL=egl timeout 200 python3 examples/torchrl_ppo_pixels.py --envs 16 --steps 64 \
            --iterations "${TORCHRL_ITERATIONS:-30}" > "$OUT/torchrl_ppo.log" 2>&1
        echo "example rc $?"; grep -E "^(GymBatchEnv|iteration|loss)" "$OUT/torchrl_ppo.log" | tail -32
        wait
        grep -E "^two writers|^(FAILED|ERROR)|passed|failed|race exit" "$OUT/slots3_race.log" | tail -6
        MUJOCO_GL=egl timeout 130 python3 -m gltensor.bench mujoco --envs "${MUJOCO_ENVS:-4,16,64,256}" --visuals light \
            --steps "${MUJOCO_STEPS:-25}" --rounds 3 --dm-task "" \
            --paths async,batch,batch-per-env,physics,rollout,render,render+read,pixels \
            --json "$OUT/mujoco_fast.json" > "$OUT/mujoco_fast.log" 2>&1; echo "mujoco bench rc $?"
        grep -v settotalmass "$OUT/mujoco_fast.log" | grep -E "^HalfCheetah|^task" | head -45
        MUJOCO_GL=egl timeout 110 python3 -m gltensor.bench torchrl --envs "${TORCHRL_ENVS:-16,64}" --steps 40 \
            --rounds 2 --json "$OUT/torchrl.json" --plot "$OUT/torchrl.png" > "$OUT/torchrl_bench.log" 2>&1
        echo "torchrl bench rc $?"; grep -vE "settotalmass|^$" "$OUT/torchrl_bench.log" | tail -16 ;;
    mujoco-round) # one call for the MuJoCo round's GPU figures after a change to the batched paths: round-tests, then,
                  # alone, round-mujoco, round-dmc and round-torchrl (each also a step of its own, to compose calls).
                  # Needs .whl with mujoco, gymnasium, dm_control, torchrl. ~9 minutes with these limits, and they
                  # cut two parts on an H200 (28 Nov): the tests need ~170 s with -n 15 (ROUND_TESTS_TIME) and the
                  # TorchRL bench at N = 64 more than 90 s (ROUND_TORCHRL_TIME); raise one and lower another (or the
                  # ENVS), since the whole call must stay under 10 minutes.
        for sub in round-tests round-mujoco round-dmc round-torchrl; do run_step $sub; done ;;
    round-tests) # the MuJoCo/dm_control/TorchRL tests on CUDA in parallel (the v5 tasks at 1,000 steps, the vector
                 # env, dm_control's threads and measured path choice, the review's defects, TorchRL)
        MUJOCO_GL=egl timeout ${ROUND_TESTS_TIME:-140} python3 -m pytest -q -p no:cacheprovider -rfEs -n ${TESTS_WORKERS:-12} \
            tests/test_mujoco_tasks.py tests/test_mujoco_vector.py tests/test_dmc_threads.py tests/test_mujoco_defects.py \
            tests/test_torchrl.py tests/test_bench_mujoco.py > "$OUT/round_tests.log" 2>&1
        echo "tests rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^E  " "$OUT/round_tests.log" | tail -15 ;;
    round-mujoco) # bench mujoco, N = 4..256 beside its floors and AsyncVectorEnv (MUJOCO_ENVS, MUJOCO_STEPS, MUJOCO_ROUNDS,
                  # MUJOCO_WARMUP, MUJOCO_SETTLE)
        MUJOCO_GL=egl timeout ${ROUND_MUJOCO_TIME:-190} python3 -m gltensor.bench mujoco --envs "${MUJOCO_ENVS:-4,16,64,256}" \
            --visuals light --steps "${MUJOCO_STEPS:-30}" --rounds "${MUJOCO_ROUNDS:-3}" --warmup "${MUJOCO_WARMUP:-10}" \
            --settle "${MUJOCO_SETTLE:-150}" --dm-task "" \
            --paths async,batch,batch-per-env,physics,rollout,render+read,pixels \
            --json "$OUT/mujoco_fast.json" > "$OUT/mujoco_fast.log" 2>&1; echo "mujoco bench rc $?"
        grep -v settotalmass "$OUT/mujoco_fast.log" | grep -E "^HalfCheetah|^task" | head -40 ;;
    round-dmc) # bench dmc (cheetah-run, N = 4, 16, 64: both paths, the measured choice, the physics floor)
        MUJOCO_GL=egl timeout ${ROUND_DMC_TIME:-80} python3 -m gltensor.bench dmc --envs "${DMC_ENVS:-4,16,64}" \
            --steps "${DMC_STEPS:-40}" --rounds "${DMC_ROUNDS:-3}" --json "$OUT/dmc.json" > "$OUT/dmc_bench.log" 2>&1
        echo "dmc bench rc $?"; grep -vE "settotalmass|^$" "$OUT/dmc_bench.log" | tail -22 ;;
    round-torchrl) # bench torchrl (ParallelEnv / SerialEnv of GymEnv vs gltensor's env vs MujocoVectorEnv alone)
        MUJOCO_GL=egl timeout ${ROUND_TORCHRL_TIME:-110} python3 -m gltensor.bench torchrl --envs "${TORCHRL_ENVS:-16,64}" \
            --steps "${TORCHRL_STEPS:-30}" --rounds "${TORCHRL_ROUNDS:-2}" --json "$OUT/torchrl.json" --plot "$OUT/torchrl.png" \
            > "$OUT/torchrl_bench.log" 2>&1; echo "torchrl bench rc $?"
        grep -vE "settotalmass|^$" "$OUT/torchrl_bench.log" | tail -12 ;;
    phases) # tools/mujoco_batched_phases.py: where a batched step's time goes beside the pixel floor (PHASES_ENVS, PHASES_THREADS,
            # PHASES_STEPS, PHASES_WARMUP, PHASES_ROUNDS; PHASES_ARGS: more options, e.g. --breakdown)
        MUJOCO_GL=egl timeout ${PHASES_TIME:-120} python3 tools/mujoco_batched_phases.py --envs "${PHASES_ENVS:-4,64}" \
            --threads "${PHASES_THREADS:-4,16}" --steps "${PHASES_STEPS:-100}" --warmup "${PHASES_WARMUP:-100}" \
            --rounds "${PHASES_ROUNDS:-3}" ${PHASES_ARGS:-} --json "$OUT/phases.json" 2>&1 \
            | grep -v settotalmass | tee "$OUT/phases.log" ;;
    ppo-torchrl) # the TorchRL PPO example end to end on CUDA: its loss per iteration
        MUJOCO_GL=egl timeout ${PPO_TIME:-150} python3 examples/torchrl_ppo_pixels.py --envs 16 --steps 64 \
            --iterations "${TORCHRL_ITERATIONS:-40}" > "$OUT/torchrl_ppo.log" 2>&1
        echo "example rc $?"; grep -E "^(GymBatchEnv|iteration|loss)" "$OUT/torchrl_ppo.log" | tail -45 ;;
    dmc-threads) # DmControlBatch's batched path (each suite task per env, MuJoCo steps in mjstep.c's C threads):
                 # its tests on the CUDA backend (TimeSteps, states and pixels equal to each env's own step(), six
                 # suite tasks, PhysicsError, path choice, close in flight; the DmControlBatch tests of
                 # test_mujoco_vector too), then `python -m gltensor.bench dmc` at N = 4, 16, 64 (cheetah-run:
                 # per-env vs threaded physics, the physics floor, the batch with pixels on both paths). ~2-3 minutes.
                 # Needs mujoco, glfw, pyopengl, absl-py, dm_control, dm-env, dm-tree, lxml, gymnasium,
                 # farama-notifications, cloudpickle (cp312): carry them in .whl-dmc (installed here; dm_control's
                 # wheel is 56 MB, so .whl-dmc holds one without its locomotion/test/blender assets, which the suite
                 # never reads: 11 MB) instead of .whl, or in .whl. DMC_ENVS, DMC_STEPS change the run.
        if ls .whl-dmc/*.whl >/dev/null 2>&1; then
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-dmc \
                .whl-dmc/*.whl > "$OUT/dmc_pip.log" 2>&1 || tail -5 "$OUT/dmc_pip.log"
            export PYTHONPATH=/tmp/site-dmc${PYTHONPATH:+:$PYTHONPATH}
        fi
        python3 -c "import importlib.metadata as m; print('dm_control', m.version('dm_control'), '| mujoco', m.version('mujoco'))"
        MUJOCO_GL=egl timeout 150 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_dmc_threads.py \
            "tests/test_mujoco_vector.py::test_dm_control_batch_equals_physics_render" > "$OUT/dmc_tests.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|^E  " "$OUT/dmc_tests.log" | tail -20
        MUJOCO_GL=egl timeout 90 python3 -m gltensor.bench dmc --envs "${DMC_ENVS:-4,16,64}" \
            --steps "${DMC_STEPS:-50}" --rounds 3 --json "$OUT/dmc.json" > "$OUT/dmc_bench.log" 2>&1
        echo "dmc bench rc $?"; grep -vE "settotalmass|^$" "$OUT/dmc_bench.log" | tail -20 ;;
    memcheck-mujoco) # the MuJoCo batch's CUDA side under memcheck: BatchRenderer's tiles read into CUDA memory (the
                     # sheet, both ways to it, read options), and MujocoVectorEnv's step on CUDA. No leak
                     # check: under compute-sanitizer reads' frames outlive their tensors (the Python functions on the
                     # stack at a CUDA allocation keep their locals) and it reports their buffers as leaked
                     # (benchmarks/results/gpu_round_tests_h200.txt); test_frames_are_given_back_when_their_tensors_die
                     # checks the frames' lifetime outside it. The PPO example's subprocess is left out: under
                     # memcheck with --leak-check full it ended with SIGSEGV after training; run alone under memcheck
                     # without the leak check it exits 0 with no error (H200, 2026-11-29).
        GLTENSOR_UNDER_SANITIZER=1 MUJOCO_GL=egl timeout ${MEMCHECK_TIME:-300} compute-sanitizer --tool memcheck \
            --error-exitcode 99 --log-file "$OUT/memcheck_mujoco.txt" python3 -m pytest -q -rfEs \
            -p no:cacheprovider -k "(cuda or test_mujoco_vector) and not ppo_example" \
            tests/test_mujoco_batch.py tests/test_mujoco_vector.py \
            > "$OUT/memcheck_mujoco.log" 2>&1; echo "memcheck-mujoco: exit $? (99: the tool found errors)"
        grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/memcheck_mujoco.log" | tail -6
        grep -E "ERROR SUMMARY" "$OUT/memcheck_mujoco.txt" | tail -3 ;;
    mujoco-batch) # issue 33: every tile of gltensor.mujoco.BatchRenderer equal to its env's own Renderer.render()
                  # on both backends (CUDA: the batch on the GPU), N up to 256, MuJoCo's default and light visuals;
                  # RendererCapture beside it. Carry the mujoco wheels in .whl (dm_control too, or its test skips).
        GLTENSOR_MUJOCO_BATCH_BIG=1 MUJOCO_GL=egl timeout 540 python3 -m pytest -q -p no:cacheprovider -rfEs \
            tests/test_mujoco_batch.py tests/test_mujoco.py > "$OUT/mujoco_batch.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|^E  " "$OUT/mujoco_batch.log" | tail -40 ;;
    torchrl) # TorchRL pixel envs (gltensor.torchrl) on the CUDA backend: the tests (check_env_specs, frames/rewards/
             # flags equal to TorchRL's own GymEnv, partial resets, seeding, devices, errors, collector + image transforms
             # with Resize), the PPO example end to end (its loss per iteration, then first vs last), and
             # `python -m gltensor.bench torchrl` at N = 4, 16, 64 (ParallelEnv / SerialEnv of GymEnv vs GymBatchEnv vs
             # MujocoVectorEnv alone, and the `layer` row: the TorchRL layer alone in µs per batch step and its share
             # of MujocoVectorEnv's step, the <= 5% target at N = 64; JSON + plot). The tests include the layer's fast
             # paths (any_done from host flags, one host-to-device copy per step) against TorchRL's own methods, here
             # on CUDA. ~3-5 minutes. Carry in .whl: torchrl 0.14.1, tensordict 0.14.3,
             # pyvers, hoptorch, cloudpickle, torchvision matching this torch (0.26.0 for 2.11), mujoco, gymnasium,
             # farama-notifications, imageio, glfw (dm_control and its dependencies too, or its two tests skip).
             # TORCHRL_ENVS, TORCHRL_STEPS, TORCHRL_ROUNDS, TORCHRL_ITERATIONS change the run.
        python3 -c "import torch, torchrl, tensordict; print('torch', torch.__version__, '| torchrl', torchrl.__version__, '| tensordict', tensordict.__version__)"
        MUJOCO_GL=egl timeout 240 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_torchrl.py \
            > "$OUT/torchrl_tests.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|^E  " "$OUT/torchrl_tests.log" | tail -20
        MUJOCO_GL=egl timeout 150 python3 examples/torchrl_ppo_pixels.py --envs 16 --steps 64 \
            --iterations "${TORCHRL_ITERATIONS:-40}" > "$OUT/torchrl_ppo.log" 2>&1
        echo "example rc $?"; grep -E "^(GymBatchEnv|iteration|loss)" "$OUT/torchrl_ppo.log" | tail -45
        MUJOCO_GL=egl timeout 300 python3 -m gltensor.bench torchrl --envs "${TORCHRL_ENVS:-4,16,64}" \
            --steps "${TORCHRL_STEPS:-100}" --rounds "${TORCHRL_ROUNDS:-3}" --json "$OUT/torchrl.json" \
            --plot "$OUT/torchrl.png" > "$OUT/torchrl_bench.log" 2>&1; echo "bench rc $?"
        grep -vE "settotalmass|^$" "$OUT/torchrl_bench.log" | tail -26 ;;
    docs) # every ```python block of README.md and docs/*.md as written, in its own process, on CUDA
          # (GLTENSOR_DOCS_BACKEND=cuda: a probe fails the run if backend="auto" does not give CUDA), with none of
          # MUJOCO_GL, PYOPENGL_PLATFORM, DISPLAY set (the test strips them from each block's environment; unset
          # here too); the engine blocks skip unless their wheels are carried (.whl); then PyOpenGL's and MuJoCo's
          # platform choice, the figures' sources and the README's rules
        env -u MUJOCO_GL -u PYOPENGL_PLATFORM -u DISPLAY -u WAYLAND_DISPLAY GLTENSOR_DOCS_BACKEND=cuda timeout 500 \
            python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_doc_snippets.py tests/test_pyopengl_platform.py \
            tests/test_mujoco_gl.py tests/test_docs_truth.py > "$OUT/docs.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/docs.log" | tail -30 ;;
    engines)
        timeout 420 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_panda3d.py tests/test_panda3d_prc.py \
            tests/test_mujoco.py tests/test_moderngl.py tests/test_c_example.py > "$OUT/engines.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/engines.log" | tail -30 ;;
    upload) # tensor -> GL (issue 15): its tests on the CUDA backend (uploads, buffer maps, the C example, the
            # examples, the device rule), the particle example at 1M particles, then the benchmark (~1 minute)
        timeout 300 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_upload.py tests/test_buffer.py \
            tests/test_c_upload_example.py tests/test_upload_examples.py tests/test_bench_upload.py \
            tests/test_device_guard.py > "$OUT/upload_tests.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/upload_tests.log" | tail -30
        grep -E "^E  " "$OUT/upload_tests.log" | head -30
        # the fallback for formats a surface cannot bind (kernel into a staging buffer + one 2D copy), forced
        GLTENSOR_UPLOAD_PATH=copy timeout 200 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_upload.py \
            > "$OUT/upload_copy_path.log" 2>&1
        echo "copy path: $(grep -E "passed|failed" "$OUT/upload_copy_path.log" | tail -1)"
        timeout 120 python3 examples/torch_particles.py --million --frames 30 --size 512 512 \
            --out "$OUT/particles.gif" 2>&1 | tail -3
        timeout 60 python3 examples/torch_texture_viewer.py --size 1024 1024 --frames 60 --out "$OUT/viewer.png" 2>&1 | tail -2
        timeout 180 python3 -m gltensor.bench upload --json "$OUT/upload.json" > "$OUT/upload_bench.log" 2>&1
        tail -16 "$OUT/upload_bench.log" ;;
    memcheck-upload) # out-of-bounds surface writes or buffer accesses of the upload and buffer paths
        GLTENSOR_UNDER_SANITIZER=1 timeout 400 compute-sanitizer --tool memcheck --error-exitcode 99 \
            --log-file "$OUT/memcheck_upload.txt" python3 -m pytest -q -p no:cacheprovider -x tests/test_upload.py \
            tests/test_buffer.py -k cuda > "$OUT/memcheck_upload.log" 2>&1; echo "memcheck exit $? (99: errors found)"
        tail -3 "$OUT/memcheck_upload.log"; grep -E "ERROR SUMMARY|Invalid" "$OUT/memcheck_upload.txt" | sort | uniq -c | head ;;
    multigpu) # correctness on every device: the multigpu tests (device 0 and 1, torch on the other GPU),
              # CUDA_VISIBLE_DEVICES permutations, LOCAL_RANK, engines on the rank's GPU, the DDP example per GPU
        timeout 420 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_device_guard.py tests/test_multigpu.py \
            tests/test_distributed_example.py > "$OUT/multigpu.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/multigpu.log" | tail -30
        grep -E "^E  |^tests/.*Error" "$OUT/multigpu.log" | head -40 ;;
    memcheck-multigpu) # wrong-device and out-of-bounds accesses of the device matrix (the v0.1 bug's signature)
        GLTENSOR_UNDER_SANITIZER=1 timeout 400 compute-sanitizer --tool memcheck --error-exitcode 99 \
            --log-file "$OUT/memcheck_multigpu.txt" python3 -m pytest -q -p no:cacheprovider -x tests/test_multigpu.py \
            -k "not local_rank and not default_device and not torch_current and not permutations and not gpu1_makes and not mujoco" \
            > "$OUT/memcheck_multigpu.log" 2>&1; echo "memcheck exit $? (99: errors found)"
        tail -3 "$OUT/memcheck_multigpu.log"; grep -E "ERROR SUMMARY|Invalid" "$OUT/memcheck_multigpu.txt" | sort | uniq -c | head ;;
    scaling) # issue 23: tools/ddp_scaling.py, examples/distributed/train_ddp.py at the same per-rank load on 1 and
             # on 2 GPUs: ABBA pairs (1,2 then 2,1), the per-pair efficiency and each side's frames/s with their
             # spread, host time per phase of every run, and one --profile-phases run per side (each phase waited
             # for, the all-reduce span from CUDA events). ~5 minutes; SCALING_CONFIGS (';'-separated train_ddp
             # arguments, e.g. "--mode atlas --no-train;--mode batch;--mode atlas --targets host"), SCALING_PAIRS,
             # SCALING_STEPS, SCALING_TIME (seconds) change it. Per-run logs and JSON under $OUT/scaling/runs.
        IFS=';' read -ra cfgs <<< "${SCALING_CONFIGS:---mode atlas}"
        cargs=(); for c in "${cfgs[@]}"; do cargs+=("--config=$c"); done
        timeout $(( ${SCALING_TIME:-285} + 60 )) python3 tools/ddp_scaling.py --out "$OUT/scaling" "${cargs[@]}" \
            --pairs "${SCALING_PAIRS:-6}" --steps "${SCALING_STEPS:-600}" --warmup 50 --profile-runs 1 \
            --time-limit "${SCALING_TIME:-285}" > "$OUT/scaling.log" 2>&1; echo "ddp_scaling exit $?"
        grep -v "^  " "$OUT/scaling.log" | tail -45 ;;
    multinode) # issue 23: multi-node as users launch it, simulated on this host: two `torchrun --nnodes=2
               # --rdzv_backend=c10d` launches (the command of train_ddp.py's docstring), each seeing one GPU
               # through CUDA_VISIBLE_DEVICES. Both on GPU 0 (gloo: NCCL refuses two ranks on one device); with
               # 2+ GPUs also one node per GPU (NCCL). Then the CI test of the same launch. ~3 minutes.
        two_nodes() { # $1 tag, $2 node 0's GPU, $3 node 1's GPU, rest: train_ddp arguments
            local tag=$1 g0=$2 g1=$3 port=$((29600 + RANDOM % 300)) pids=() rc=0; shift 3
            for node in 0 1; do
                g=$g0; [ "$node" = 1 ] && g=$g1
                CUDA_VISIBLE_DEVICES=$g timeout 150 python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=1 \
                    --node_rank=$node --rdzv_backend=c10d --rdzv_endpoint=localhost:$port --rdzv_id=gltensor-$tag \
                    examples/distributed/train_ddp.py --cameras 64 --size 128 --steps 300 "$@" \
                    --json "$OUT/multinode_$tag.json" > "$OUT/multinode_${tag}_node$node.log" 2>&1 &
                pids+=($!)
            done
            for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
            echo "== $tag: node 0 on GPU $g0, node 1 on GPU $g1: exit $rc"
            cat "$OUT"/multinode_"${tag}"_node*.log | sed -n '/ rank(s), /,/^total:/p'
            grep -hE "Error|error:" "$OUT"/multinode_"${tag}"_node*.log | head -8
        }
        two_nodes onegpu 0 0 --dist-backend gloo
        [ "$(nvidia-smi -L | wc -l)" -ge 2 ] && two_nodes twogpus 0 1
        timeout 200 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_distributed_example.py -k two_nodes \
            > "$OUT/multinode_test.log" 2>&1
        grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/multinode_test.log" | tail -5 ;;
    faults) # issue 34: faults across processes on both backends (worker SIGKILLed mid-write or SIGSTOPped, trainer
            # SIGKILLed, a grandchild's handle, SB3/Gymnasium paths) and GLTENSOR_CYCLES create/close cycles with a
            # worker attaching each time (memfd descriptors and mappings counted in both processes: flat), then the
            # Python-side findings (tests/test_slots_python_trust.py), the sealed geometry (no descriptor a worker
            # holds can change it) and a failed second write (slot stale, its image intact). -s prints the cycle
            # counts and times.
        GLTENSOR_CYCLES=${GLTENSOR_CYCLES:-10000} timeout 360 python3 -m pytest -q -s -p no:cacheprovider -rfEsxX \
            tests/test_slots_faults.py tests/test_slots_python_trust.py tests/test_slots_sealed.py \
            tests/test_slots_failed_write.py > "$OUT/faults.log" 2>&1
        echo "faults: exit $?"
        grep -E "^(FAILED|ERROR|XFAIL|XPASS)|passed|failed|cycles in|^E " "$OUT/faults.log" | tail -30 ;;
    slots3) # shared slots, round 3, on both backends: a spawned worker resizes (ftruncate smaller, 0, larger),
            # punches (fallocate PUNCH_HOLE) and maps again every memory of the slots it holds, then the trainer
            # reads, writes, reads after a write or closes (every memfd sealed: the trainer must never die); a
            # changed control page put back; handles never received taken back at close; one writer per slot (a
            # second process refused, a dead one taken over, a forked child named as itself); a handle writes its
            # own slot only; then the CUDA two-writer race for SLOTS3_RACE s (300: the 5-minute target; -s prints
            # clean/torn/refused and each writer's writes and refusals). About 6.5 minutes.
        timeout 150 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_slots_resize.py tests/test_slots_writers.py \
            tests/test_slots_sealed.py tests/test_slots_trust.py -k "not fuzz" > "$OUT/slots3_tests.log" 2>&1
        echo "slots3 tests: exit $?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/slots3_tests.log" | tail -20
        GLTENSOR_RACE_SECONDS=${SLOTS3_RACE:-300} timeout $(( ${SLOTS3_RACE:-300} + 90 )) python3 -m pytest -q -s -rfEs \
            -p no:cacheprovider -k cuda tests/test_slots_two_writers.py > "$OUT/slots3_race.log" 2>&1
        echo "slots3 race: exit $?"; grep -E "^two writers|^(FAILED|ERROR)|passed|failed" "$OUT/slots3_race.log" | tail -5 ;;
    memcheck-slots3) # the round-3 slot tests on the CUDA backend under memcheck: the trainer's reads and closes after
                     # a worker resized or punched what it holds, and writers taking turns on one slot (30 s race)
        GLTENSOR_UNDER_SANITIZER=1 GLTENSOR_RACE_SECONDS=30 timeout ${MEMCHECK_TIME:-420} compute-sanitizer \
            --tool memcheck --leak-check full --error-exitcode 99 --log-file "$OUT/memcheck_slots3.txt" \
            python3 -m pytest -q -s -p no:cacheprovider -k cuda tests/test_slots_resize.py tests/test_slots_writers.py \
            tests/test_slots_two_writers.py > "$OUT/memcheck_slots3.log" 2>&1
        echo "memcheck-slots3: exit $? (99: the tool found errors)"
        grep -E "^two writers|passed|failed" "$OUT/memcheck_slots3.log" | tail -4
        grep -E "ERROR SUMMARY|LEAK SUMMARY" "$OUT/memcheck_slots3.txt" | tail -3 ;;
    reliability) # tests/reliability on the CUDA backend: bad input, lifetimes, threads, properties, fuzzing, the
                 # CI-size soak (20,000 reads, CPU and CUDA); the counts and drifts are printed (-s)
        timeout 470 python3 -m pytest -q -s -p no:cacheprovider -rfEs tests/reliability > "$OUT/reliability.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed|cases|soak |cycles|threads x|python thread|accepted" "$OUT/reliability.log" | tail -30 ;;
    soak) # 1,000,000 reads on the CUDA backend (mixed: plain, converted, out=, batch, atlas), RSS and device memory
          # sampled every 100,000 reads; bounds 16 MiB (host) and 8 MiB (device) from the first sample to the end
        GLTENSOR_SOAK_READS=${GLTENSOR_SOAK_READS:-1000000} timeout 470 python3 -m pytest -q -s -p no:cacheprovider \
            -rfEs "tests/reliability/test_lifetimes.py::test_soak_reads_memory_flat[cuda]" > "$OUT/soak.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed|soak |^E " "$OUT/soak.log" | tail -12 ;;
    memcheck|racecheck|synccheck) # compute-sanitizer over the GPU tests; tests whose bounds the tool distorts skip
        # (sanitizer_distorts marker, GLTENSOR_UNDER_SANITIZER=1). Summary: the tool's error count, and how many
        # reports have a host frame in gltensor (_gltensor*.so) or a gltensor kernel (gather, depth_kernel).
        case "$step" in
        memcheck) files="tests/test_gpu.py tests/test_formats.py tests/test_convert.py tests/test_batch.py tests/test_atlas.py tests/test_dlpack.py tests/test_lifetime.py tests/test_resize.py tests/test_depth.py tests/test_msaa.py tests/reliability"; extra="--leak-check full" ;;
        *) files="tests/test_gpu.py tests/test_convert.py tests/test_batch.py tests/test_atlas.py tests/test_depth.py"; extra="" ;;
        esac
        GLTENSOR_UNDER_SANITIZER=1 timeout 470 compute-sanitizer --tool "$step" $extra --error-exitcode 99 \
            --log-file "$OUT/$step.txt" python3 -m pytest -q -p no:cacheprovider -m gpu $files \
            > "$OUT/$step.log" 2>&1; echo "$step: exit $? (99: the tool found errors; 124: time limit)"
        tail -2 "$OUT/$step.log"
        python3 - "$OUT/$step.txt" "$step" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
blocks = re.split(r"\n(?========== (?:Invalid|Race|Barrier|Uninitialized|Program hit|Leaked|Error|Warp|Cuda))", text)
reports = [b for b in blocks if re.match(r"========= (Invalid|Race|Barrier|Uninitialized|Program hit|Leaked|Error|Warp|Cuda)", b)]
ours = [b for b in reports if "_gltensor" in b or re.search(r"\bglt_\w+|\bgather\b|\bdepth_kernel\b", b)]
summary = re.findall(r"ERROR SUMMARY: (\d+) error", text)
print(f"{sys.argv[2]}: ERROR SUMMARY {summary[-1] if summary else '?'}; reports {len(reports)}, attributed to gltensor {len(ours)}")
for b in ours[:3]:
    print("\n".join(b.splitlines()[:12]))
PY
        ;;
    *) echo "unknown step $step (tests bench convert suite quick quickclears depth engines panda3d mujoco mujoco-batch torchrl multigpu memcheck-multigpu scaling multinode reliability trust memcheck-trust faults soak memcheck racecheck synccheck)"; exit 2 ;;
    esac
}
# A step named bg:STEP runs in the background (its output to $OUT/bg_STEP.out, printed at the next `wait` step or
# at the end), so a correctness step (docs) can share a call with a long one (tests) on a 16-core machine.
for step in "$@"; do
    case "$step" in
    bg:*) run_step "${step#bg:}" > "$OUT/bg_${step#bg:}.out" 2>&1 & ;;
    wait) wait; for f in "$OUT"/bg_*.out; do [ -e "$f" ] && { echo "== $(basename "$f")"; cat "$f"; rm -f "$f"; }; done ;;
    *) run_step "$step" ;;
    esac
done
wait; for f in "$OUT"/bg_*.out; do [ -e "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done
