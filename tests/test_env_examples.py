"""The two vector-env examples over shared slots run end to end at a small size (on the GPU machine with the
CUDA backend): examples/gymnasium_slots.py (AsyncVectorEnv + a CNN policy in a plain PyTorch loop) and
examples/sb3_slots.py (SB3 PPO on SlotVecEnv, and its --bench mode against the stock SubprocVecEnv)."""

import json

import pytest

import gltensor

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from test_upload_examples import run_example  # noqa: E402


def test_gymnasium_slots(tmp_path):
    out = run_example("gymnasium_slots.py", "--envs", 3, "--size", 48, "--steps", 20, tmp_path=tmp_path)
    assert "check: the batch equals every worker's glReadPixels exactly (3 distinct images)" in out
    assert "trained: 20 steps of 3 envs" in out


def test_sb3_slots_ppo(tmp_path):
    pytest.importorskip("stable_baselines3")
    out = run_example("sb3_slots.py", "--envs", 2, "--size", 40, "--timesteps", 64, tmp_path=tmp_path)
    assert "PPO: 64 timesteps" in out


def test_sb3_slots_bench(tmp_path):
    pytest.importorskip("stable_baselines3")
    out = run_example("sb3_slots.py", "--bench", "--envs", 2, "--size", 40, "--steps", 10, "--repeats", 1,
                      "--json", "b.json", tmp_path=tmp_path)
    assert "| N | size | SubprocVecEnv" in out
    (r,) = json.loads((tmp_path / "b.json").read_text())
    measured = ["SlotVecEnv[cpu]"] + (["SlotVecEnv[cuda]"] if gltensor.cuda_available() else [])
    assert sorted(r["speedup"]) == sorted(measured) and r["n_envs"] == 2
    assert all(r["exact"][p] for p in measured), r["exact"]
    assert r["SubprocVecEnv"]["us_per_step"] > 0
    for p in measured:
        assert r[p]["us_per_step"] > 0 and r[p]["backend"] == p[len("SlotVecEnv["):-1]
    assert list(r["skipped"]) == ([] if gltensor.cuda_available() else ["cuda"])
