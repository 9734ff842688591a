"""What the benchmark's cameras draw: N render targets and an atlas of the same tiles (Cameras), and the
one-camera draw of the fixed-step modes (single_draw). Each picture differs between cameras and steps and
is not symmetric, so that a flip, a swapped camera or a stale frame fails a path's check."""
import math

import numpy as np


def atlas_grid(n):
    """As square as possible: cols = ceil(sqrt(n)), rows = ceil(n / cols)."""
    cols = math.ceil(math.sqrt(n))
    return math.ceil(n / cols), cols




_PATTERN_VS = """
#version 330 core
// Camera k draws vertices 3k..3k+2: one triangle that covers the viewport. The camera index comes from
// gl_VertexID (glDrawArrays' first = 3k counts in it), so a camera costs one draw call and no uniform.
flat out int v_camera;
void main() {
    int k = gl_VertexID / 3;
    int v = gl_VertexID - 3 * k;
    v_camera = k;
    gl_Position = vec4(v == 1 ? 3.0 : -1.0, v == 2 ? 3.0 : -1.0, 0.0, 1.0);
}
"""

_PATTERN_FS = """
#version 330 core
uniform int u_step;
uniform ivec2 u_size;    // one camera's image; atlas tiles start at multiples of it
uniform ivec2 u_corner;  // the bottom-left corner that gets the second colour
flat in int v_camera;
out vec4 o_color;
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy) % u_size;  // the pixel within the camera's image (or atlas tile)
    int r = (u_step + v_camera) % 256;
    // Multiples of 1/255: GL's float -> unorm8 conversion gives these bytes exactly.
    vec4 full = vec4(float(r), 64.0, float((37 * v_camera) % 256), 255.0) / 255.0;
    vec4 corner = vec4(float(255 - r), 204.0, 26.0, 255.0) / 255.0;
    o_color = (p.x < u_corner.x && p.y < u_corner.y) ? corner : full;
}
"""

# What a step draws, per --draw of the suite (and Cameras(draw=...)).
DRAWS = {
    "pattern": "one draw call per camera (an FBO bind, or a viewport for an atlas tile, then a triangle covering the "
               "image): a colour that changes with the step and the camera, and a second colour in the bottom-left "
               "corner (w/2 x h/4), so that a flip, a swapped camera or a stale frame shows",
    "clears": "per camera a full clear and a scissored clear of the bottom-left corner (w/2 x h/4), colours that "
              "change with the step and the camera (7 GL calls per camera)",
    "scene": "the lit demo scene (gltensor.scene: cube, sphere, checkered ground) from camera k, with depth",
}


class Cameras:
    """N render targets (one RGBA8 texture + FBO each) and, when `atlas`, one atlas texture of the same N
    tiles, plus the draw functions of both layouts. Camera k's picture is the same in its own texture and
    in tile k.

    `draw` (see DRAWS): "pattern" (one draw call per camera, the suite's), "clears" (a frame of clears: a clear
    and a scissored clear per camera), "scene" (the lit Scene from camera k). Default: "scene" when
    `use_scene`, else "clears". Calls go through PyOpenGL's raw entry points (no per-call error check), so
    that Python's call overhead stays small next to what is measured."""

    def __init__(self, n, w, h, use_scene=False, atlas=True, draw=None):
        from OpenGL import GL
        from gltensor.scene import RenderTarget, Scene
        draw = draw or ("scene" if use_scene else "clears")
        if draw not in DRAWS:
            raise ValueError("draw must be one of %s, got %r" % (", ".join(DRAWS), draw))
        self.GL, self.n, self.w, self.h, self.draw = GL, n, w, h, draw
        self.targets, self.atlas_target, self.scene, self._pattern = [], None, None, None
        self.rows, self.cols = atlas_grid(n)
        # The bottom-left corner that gets the second colour (clears and pattern); the step only changes red.
        self._corner = (max(w // 2, 1), max(h // 4, 1))
        use_scene = draw == "scene"
        try:
            # Depth only where the lit scene needs it: the clears and the pattern do not.
            self.targets = [RenderTarget(w, h, depth=use_scene) for _ in range(n)]
            if atlas:
                self.atlas_target = RenderTarget(self.cols * w, self.rows * h, depth=use_scene)
            self.scene = Scene(w, h) if use_scene else None  # one program and vertex buffer for all cameras
            if draw == "pattern":
                self._pattern = _PatternProgram(w, h, *self._corner)
        except Exception:
            self.close()
            raise
        # Tile k per docs/python-api.md: the grid anchored at the top-left as seen on screen, tile 0
        # top-left, then left to right, top to bottom. In GL coordinates (origin bottom-left):
        self.tiles = [((k % self.cols) * w, (self.rows - 1 - k // self.cols) * h, w, h) for k in range(n)]
        self.draw_targets = {"scene": self._draw_scene_targets, "clears": self._draw_clear_targets,
                             "pattern": self._draw_pattern_targets}[draw]
        self.draw_atlas = {"scene": self._draw_scene_atlas, "clears": self._draw_clear_atlas,
                           "pattern": self._draw_pattern_atlas}[draw]
        from OpenGL.raw.GL.VERSION import GL_1_0, GL_3_0
        self._raw = (GL_1_0.glScissor, GL_1_0.glClearColor, GL_1_0.glClear, GL_3_0.glBindFramebuffer)
        self._fbos = [t.fbo for t in self.targets]

    @property
    def atlas_size(self):
        return self.cols * self.w, self.rows * self.h

    def _clears(self, i, origins):
        scissor, clear_color, clear, _ = self._raw
        bit = self.GL.GL_COLOR_BUFFER_BIT
        w, h = self.w, self.h
        cw, ch = self._corner
        for k, (x, y) in enumerate(origins):
            r = ((i + k) % 256) / 255.0
            scissor(x, y, w, h)
            clear_color(r, 0.25, ((37 * k) % 256) / 255.0, 1.0)
            clear(bit)
            scissor(x, y, cw, ch)
            clear_color(1.0 - r, 0.8, 0.1, 1.0)
            clear(bit)

    def _draw_clear_targets(self, i):
        GL = self.GL
        scissor, clear_color, clear, bind = self._raw
        bit, fb = GL.GL_COLOR_BUFFER_BIT, GL.GL_FRAMEBUFFER
        w, h = self.w, self.h
        cw, ch = self._corner
        GL.glEnable(GL.GL_SCISSOR_TEST)
        for k, fbo in enumerate(self._fbos):  # inlined _clears: one FBO bind per camera
            bind(fb, fbo)
            r = ((i + k) % 256) / 255.0
            scissor(0, 0, w, h)
            clear_color(r, 0.25, ((37 * k) % 256) / 255.0, 1.0)
            clear(bit)
            scissor(0, 0, cw, ch)
            clear_color(1.0 - r, 0.8, 0.1, 1.0)
            clear(bit)
        GL.glDisable(GL.GL_SCISSOR_TEST)

    def _draw_clear_atlas(self, i):
        GL = self.GL
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.atlas_target.fbo)
        GL.glEnable(GL.GL_SCISSOR_TEST)
        self._clears(i, [(x, y) for (x, y, _, _) in self.tiles])
        GL.glDisable(GL.GL_SCISSOR_TEST)

    def _draw_pattern_targets(self, i):
        p = self._pattern
        p.begin(i, (0, 0, self.w, self.h))
        bind, draw, fb, tris = self._raw[3], p.draw_arrays, self.GL.GL_FRAMEBUFFER, self.GL.GL_TRIANGLES
        for k, fbo in enumerate(self._fbos):
            bind(fb, fbo)
            draw(tris, 3 * k, 3)
        p.end()

    def _draw_pattern_atlas(self, i):
        p = self._pattern
        p.begin(i, None)
        self._raw[3](self.GL.GL_FRAMEBUFFER, self.atlas_target.fbo)
        viewport, draw, tris = p.viewport, p.draw_arrays, self.GL.GL_TRIANGLES
        w, h = self.w, self.h
        for k, (x, y, _, _) in enumerate(self.tiles):
            viewport(x, y, w, h)
            draw(tris, 3 * k, 3)
        p.end()

    def _draw_scene_targets(self, i):
        for k, t in enumerate(self.targets):
            self.scene.render((i + k) / 60.0, fbo=t.fbo, viewport=t.viewport, camera=k)

    def _draw_scene_atlas(self, i):
        fbo = self.atlas_target.fbo
        for k, vp in enumerate(self.tiles):
            self.scene.render((i + k) / 60.0, fbo=fbo, viewport=vp, camera=k)

    def reference(self, atlas, flip):
        """Per-camera glReadPixels: (N, H, W, 4), of the camera textures or of the atlas tiles."""
        out = np.empty((self.n, self.h, self.w, 4), np.uint8)
        for k in range(self.n):
            if atlas:
                self.atlas_target.read_pixels(flip=flip, out=out[k], viewport=self.tiles[k])
            else:
                self.targets[k].read_pixels(flip=flip, out=out[k])
        return out

    def close(self):
        for t in self.targets:
            t.close()
        if self.atlas_target is not None:
            self.atlas_target.close()
        if self.scene is not None:
            self.scene.close()
        if self._pattern is not None:
            self._pattern.close()
            self._pattern = None


class _PatternProgram:
    """The "pattern" draw's GL objects: the program (_PATTERN_VS/_FS) and the empty vertex array that a core
    profile needs for an attribute-less draw."""

    def __init__(self, w, h, corner_w, corner_h):
        from OpenGL import GL
        from OpenGL.raw.GL.VERSION import GL_1_0, GL_1_1, GL_2_0, GL_3_0
        from gltensor.scene import _link
        self.GL = GL
        self.program = _link(_PATTERN_VS, _PATTERN_FS)
        self.vao = GL.glGenVertexArrays(1)
        GL.glUseProgram(self.program)
        GL.glUniform2i(GL.glGetUniformLocation(self.program, "u_size"), w, h)
        GL.glUniform2i(GL.glGetUniformLocation(self.program, "u_corner"), corner_w, corner_h)
        GL.glUseProgram(0)
        self._u_step = GL.glGetUniformLocation(self.program, "u_step")
        self._use, self._bind_vao, self._uniform1i = GL_2_0.glUseProgram, GL_3_0.glBindVertexArray, GL_2_0.glUniform1i
        self.viewport, self.draw_arrays = GL_1_0.glViewport, GL_1_1.glDrawArrays

    def begin(self, step, viewport):
        self._use(self.program)
        self._bind_vao(self.vao)
        self._uniform1i(self._u_step, int(step))
        if viewport is not None:
            self.viewport(*viewport)

    def end(self):
        self._bind_vao(0)
        self._use(0)

    def close(self):
        GL = self.GL
        GL.glDeleteVertexArrays(1, [self.vao])
        GL.glDeleteProgram(self.program)




def single_draw(scene, use_scene):
    """draw(i) of one gltensor.scene.Scene: the lit scene at t = i / 60, or (use_scene False) a cheap frame of
    clears plus a scissored clear of the bottom-left corner (w/2 x h/4), so that the image is not symmetric (a
    wrong flip or a stale frame shows in the correctness check)."""
    from OpenGL import GL
    if use_scene:
        return lambda i: scene.render(i / 60.0)
    w, h = scene.width, scene.height

    def clear_draw(i):
        scene.bind()
        GL.glClearColor((i % 256) / 255.0, 0.25, 0.5, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glEnable(GL.GL_SCISSOR_TEST)
        GL.glScissor(0, 0, max(w // 2, 1), max(h // 4, 1))
        GL.glClearColor(1.0 - (i % 256) / 255.0, 0.8, 0.1, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)
    return clear_draw
