"""What gltensor.mujoco.BatchRenderer accepts as models and datas, and which envs can share one MjrContext and one
MjvScene: MuJoCo objects or dm_control's wrappers of them; the fields mjr_makeContext uploads once must agree.
"""

from __future__ import annotations

import numpy as np

import gltensor

__all__ = ["as_model", "as_data", "context_mismatch", "render_flag", "scene_key"]

# The model fields that mjr_makeContext copies into the MjrContext (meshes, height field sizes, textures, skins,
# planes' grids, materials' texture bindings, the map/quality/fog settings). Envs sharing one context must
# agree on them; everything else (colours, sizes of non-plane geoms, lights, cameras, masses...) is read per
# env by mjv_updateScene and may differ (domain randomisation). Height field data (hfield_data) may differ too:
# BatchRenderer uploads each env's before drawing it whenever it differs from what the context holds.
_CONTEXT_ARRAYS = (
    "mesh_vert", "mesh_normal", "mesh_face", "mesh_facenormal", "mesh_texcoord", "mesh_facetexcoord",
    "mesh_vertadr", "mesh_normaladr", "mesh_texcoordadr", "mesh_faceadr", "mesh_facenum", "mesh_graphadr",
    "mesh_graph", "hfield_size", "hfield_nrow", "hfield_ncol", "hfield_adr",
    "tex_data", "tex_type", "tex_height", "tex_width", "tex_nchannel", "tex_adr", "tex_colorspace",
    "mat_texid", "mat_texrepeat", "mat_texuniform",
    "skin_vertadr", "skin_vertnum", "skin_texcoordadr", "skin_faceadr", "skin_facenum", "skin_face",
    "skin_texcoord",
)
_CONTEXT_STRUCTS = ("global_", "quality", "map")  # model.vis.<name>


def _unwrap(obj, cls, attr, other):
    """obj as a `cls` (mujoco.MjModel or MjData): obj itself, its .ptr (a dm_control wrapper), or its .<attr> (a
    dm_control Physics: .model / .data, a wrapper or the struct itself); None when none is. An `other` (the other
    struct) is never looked into: MjData.model is an MjModel, but a data passed as a model is a mistake."""
    if isinstance(obj, cls):
        return obj
    ptr = getattr(obj, "ptr", None)
    if isinstance(ptr, cls):
        return ptr
    if not isinstance(obj, other):
        inner = getattr(obj, attr, None)
        ptr = getattr(inner, "ptr", inner)
        if isinstance(ptr, cls):
            return ptr
    return None


def as_model(mj, obj, what):
    """mujoco.MjModel from an MjModel, a dm_control model wrapper (.ptr) or a dm_control Physics (.model)."""
    model = _unwrap(obj, mj.MjModel, "model", mj.MjData)
    if model is None:
        raise TypeError(f"{what}: expected a mujoco.MjModel (or a dm_control Physics / model wrapper), "
                        f"got {type(obj).__name__}")
    return model


def as_data(mj, obj, k):
    """mujoco.MjData from an MjData, a dm_control data wrapper (.ptr) or a dm_control Physics (.data.ptr)."""
    data = _unwrap(obj, mj.MjData, "data", mj.MjModel)
    if data is None:
        raise TypeError(f"datas[{k}]: expected a mujoco.MjData or a dm_control Physics, got {type(obj).__name__}")
    return data


def _struct_values(s):
    return {a: np.asarray(getattr(s, a)).copy() for a in dir(s)
            if not a.startswith("_") and not callable(getattr(s, a))}


def context_mismatch(mj, ref, m):
    """The first context-relevant field in which model m differs from ref, or None."""
    for name in _CONTEXT_ARRAYS:
        a, b = getattr(ref, name, None), getattr(m, name, None)
        if a is None and b is None:
            continue
        if a is None or b is None or np.shape(a) != np.shape(b) or not np.array_equal(a, b):
            return name
    plane = int(mj.mjtGeom.mjGEOM_PLANE)
    planes_a, planes_b = np.asarray(ref.geom_type) == plane, np.asarray(m.geom_type) == plane
    if planes_a.shape != planes_b.shape or not np.array_equal(planes_a, planes_b):
        return "geom_type (planes)"
    for name in ("geom_size", "geom_matid"):
        if not np.array_equal(np.asarray(getattr(ref, name))[planes_a], np.asarray(getattr(m, name))[planes_b]):
            return name + " (planes)"
    if float(ref.stat.extent) != float(m.stat.extent):
        return "stat.extent"
    for name in _CONTEXT_STRUCTS:
        va, vb = _struct_values(getattr(ref.vis, name)), _struct_values(getattr(m.vis, name))
        for key in va:
            if name == "global_" and key in ("offwidth", "offheight"):
                continue  # the batch sizes its own buffer; the pixels drawn at (0, 0) do not depend on it
            if not np.array_equal(va[key], vb.get(key)):
                return f"vis.{name}.{key}"
    return None


def render_flag(mj, flag):
    """mjtRndFlag index from the enum, its int, or a name: "shadow", "mjRND_SHADOW" (any case)."""
    if isinstance(flag, str):
        name = flag if flag.upper().startswith("MJRND_") else "mjRND_" + flag
        for member in mj.mjtRndFlag.__members__:
            if member.upper() == name.upper() and member != "mjNRNDFLAG":
                return int(getattr(mj.mjtRndFlag, member))
        names = [m[6:].lower() for m in mj.mjtRndFlag.__members__ if m.startswith("mjRND_")]
        raise gltensor.InvalidArgumentError(f"render_flags: no MuJoCo render flag {flag!r}; flags: {names}")
    index = int(flag)
    if not 0 <= index < int(mj.mjtRndFlag.mjNRNDFLAG):
        raise gltensor.InvalidArgumentError(f"render_flags: {flag!r} is not an mjtRndFlag index")
    return index


def scene_key(m):
    """Models with equal keys can share one MjvScene (its buffers are sized by these counts)."""
    names = ("nskin", "nskinvert", "nskinface", "nflex", "nflexvert", "nflexedge", "nflexelem", "nflexshelldata",
             "nflexevpair", "nflextexcoord", "nflexface", "ngeom", "nbody", "nlight", "ncam")
    return tuple(int(getattr(m, a, 0)) for a in names)
