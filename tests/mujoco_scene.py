"""The MuJoCo scene the MuJoCo tests draw (test_mujoco.py, test_mujoco_batch.py): a textured, reflective floor,
two lights, perspective and orthographic cameras, a free box, a free ball and a hinged pole, 4x MSAA -- enough
colours, depths and asymmetry that a flipped, shifted or wrong image is caught. One text for both suites."""


def scene_xml(offwidth=640, offheight=480, extras=False):
    """MJCF text. offwidth/offheight: the offscreen buffer (MuJoCo's default 640x480). extras adds what the batch
    tests need beyond that: fog and a skybox (more of the context a batch shares), a mesh body (a hinged
    tetrahedron), and a camera that tracks the box."""
    fog = '\n    <map fogstart="3" fogend="10"/>' if extras else ""
    sky = ('\n    <texture name="sky" type="skybox" builtin="gradient" rgb1=".3 .5 .7" rgb2="0 0 0" width="64" '
           'height="64"/>') if extras else ""
    mesh = '\n    <mesh name="tetra" vertex="0 0 0  .3 0 0  0 .3 0  0 0 .3"/>' if extras else ""
    track = '\n      <camera name="track" mode="trackcom" pos="0 -2 1" xyaxes="1 0 0 0 .45 .9"/>' if extras else ""
    tetra = """
    <body name="tetra" pos=".6 -.7 .3">
      <joint type="hinge" axis="0 0 1"/>
      <geom type="mesh" mesh="tetra" rgba=".9 .8 .1 1"/>
    </body>""" if extras else ""
    return f"""
<mujoco model="gltensor-test">
  <visual>
    <global offwidth="{offwidth}" offheight="{offheight}"/>
    <quality offsamples="4"/>{fog}
  </visual>
  <asset>{sky}
    <texture name="grid" type="2d" builtin="checker" rgb1=".2 .3 .4" rgb2=".8 .8 .7" width="64" height="64"/>
    <material name="grid" texture="grid" texrepeat="4 4" reflectance=".2"/>{mesh}
  </asset>
  <worldbody>
    <light name="top" pos="0 0 4" dir="0 0 -1" diffuse=".8 .8 .8"/>
    <light name="side" pos="2 -2 3" dir="-1 1 -1.2" diffuse=".4 .3 .3" directional="true"/>
    <geom name="floor" type="plane" size="3 3 .1" material="grid"/>
    <camera name="front" pos="0 -3 1.5" xyaxes="1 0 0 0 .45 .9"/>
    <camera name="side" pos="3 0.3 1.2" xyaxes="-.1 1 0 -.3 0 1"/>
    <camera name="ortho" pos="0 0 4" xyaxes="1 0 0 0 1 0" projection="orthographic" fovy="4"/>
    <body name="box" pos="-.5 0 .8" euler="10 20 30">
      <freejoint/>
      <geom name="box" type="box" size=".25 .2 .15" rgba=".9 .2 .2 1"/>{track}
    </body>
    <body name="ball" pos=".5 .3 1.2">
      <freejoint/>
      <geom name="ball" type="sphere" size=".22" rgba=".2 .8 .3 1"/>
    </body>{tetra}
    <body name="pole" pos="0 -.6 .5">
      <joint type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 .6" size=".06" rgba=".3 .4 .95 1"/>
    </body>
  </worldbody>
</mujoco>"""
