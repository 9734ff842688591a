"""A frame's pixels on the host, for the shared-slot tests: one helper, not one per file."""
import numpy as np


def to_host(frame_or_array):
    """A frame (CPU or CUDA) as a numpy array, through DLPack (torch for a CUDA frame)."""
    try:
        return np.from_dlpack(frame_or_array)
    except (BufferError, RuntimeError, TypeError):
        import torch

        return torch.from_dlpack(frame_or_array).cpu().numpy()
