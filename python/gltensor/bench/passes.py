"""Diagnostic GL passes for bench procs' workers: what one extra pass over the image costs a worker's step when
it runs as a compute dispatch or as a draw, each writing one 32-bit word per pixel into a buffer of the worker's
own (what a shared-slot write does into the trainer's memory). Paths `floor_compute` and `floor_draw`: the floor
plus one of these, so that the two kinds of pass are compared on the same GPU work and the same wait (glFinish).
"""
from OpenGL import GL
from OpenGL.raw.GL.VERSION import GL_1_0, GL_1_1, GL_2_0, GL_3_0, GL_4_3

from gltensor.scene import _compile, _link

_COMPUTE = """#version 430
layout(local_size_x = 64, local_size_y = 4) in;
layout(binding = 0) uniform sampler2D img;
layout(std430, binding = 0) writeonly buffer Out { uint words[]; };
uniform ivec2 size;
void main() {
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) return;
    words[p.y * size.x + p.x] = packUnorm4x8(texelFetch(img, p, 0));
}
"""

_VERTEX = """#version 430
void main() {  // one triangle that covers the viewport
    vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
"""

_FRAGMENT = """#version 430
layout(binding = 0) uniform sampler2D img;
layout(std430, binding = 0) writeonly buffer Out { uint words[]; };
uniform ivec2 size;
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    words[p.y * size.x + p.x] = packUnorm4x8(texelFetch(img, p, 0));
}
"""


class ExtraPass:
    """One pass reading texture `tex` (w x h RGBA8) into a buffer of its own: kind "compute" or "draw"."""

    def __init__(self, kind, tex, w, h):
        self.kind, self.tex, self.w, self.h = kind, tex, w, h
        if kind == "compute":
            shader = _compile(GL.GL_COMPUTE_SHADER, _COMPUTE)
            self.program = GL.glCreateProgram()
            GL.glAttachShader(self.program, shader)
            GL.glLinkProgram(self.program)
            GL.glDeleteShader(shader)
            if not GL.glGetProgramiv(self.program, GL.GL_LINK_STATUS):
                raise RuntimeError("compute program link failed: %s" % GL.glGetProgramInfoLog(self.program).decode())
        else:
            self.program = _link(_VERTEX, _FRAGMENT)
            self.vao = GL.glGenVertexArrays(1)
            self.fbo = GL.glGenFramebuffers(1)  # no attachments: the fragments only write the buffer
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self.fbo)
            GL.glFramebufferParameteri(GL.GL_DRAW_FRAMEBUFFER, GL.GL_FRAMEBUFFER_DEFAULT_WIDTH, w)
            GL.glFramebufferParameteri(GL.GL_DRAW_FRAMEBUFFER, GL.GL_FRAMEBUFFER_DEFAULT_HEIGHT, h)
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, 0)
        GL.glProgramUniform2i(self.program, GL.glGetUniformLocation(self.program, "size"), w, h)
        self.buffer = GL.glGenBuffers(1)
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, self.buffer)
        GL.glBufferStorage(GL.GL_SHADER_STORAGE_BUFFER, w * h * 4, None, 0)
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, 0)
        self._raw = (GL_2_0.glUseProgram, GL_1_1.glBindTexture, GL_3_0.glBindBufferBase, GL_4_3.glDispatchCompute,
                     GL_3_0.glBindVertexArray, GL_3_0.glBindFramebuffer, GL_1_0.glViewport, GL_1_1.glDrawArrays)

    def check(self, expected):
        """Runs the pass once and compares the buffer with `expected` (H, W, 4 uint8, GL's row order)."""
        import numpy as np

        self.run()
        GL.glFinish()
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, self.buffer)
        got = np.frombuffer(GL.glGetBufferSubData(GL.GL_SHADER_STORAGE_BUFFER, 0, self.w * self.h * 4), np.uint8)
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, 0)
        if not np.array_equal(got.reshape(self.h, self.w, 4), expected):
            raise RuntimeError(f"the {self.kind} pass wrote other bytes than the texture holds")

    def run(self):
        use, bind_tex, bind_base, dispatch, bind_vao, bind_fbo, viewport, draw = self._raw
        use(self.program)
        bind_tex(GL.GL_TEXTURE_2D, self.tex)
        bind_base(GL.GL_SHADER_STORAGE_BUFFER, 0, self.buffer)
        if self.kind == "compute":
            dispatch((self.w + 63) // 64, (self.h + 3) // 4, 1)
        else:
            bind_vao(self.vao)
            bind_fbo(GL.GL_DRAW_FRAMEBUFFER, self.fbo)
            viewport(0, 0, self.w, self.h)
            draw(GL.GL_TRIANGLES, 0, 3)
            bind_fbo(GL.GL_DRAW_FRAMEBUFFER, 0)
            bind_vao(0)
        bind_tex(GL.GL_TEXTURE_2D, 0)
        use(0)

    def close(self):
        GL.glDeleteBuffers(1, [self.buffer])
        GL.glDeleteProgram(self.program)
        if self.kind == "draw":
            GL.glDeleteVertexArrays(1, [self.vao])
            GL.glDeleteFramebuffers(1, [self.fbo])
