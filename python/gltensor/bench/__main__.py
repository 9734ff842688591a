"""`python -m gltensor.bench [MODE] [options]`: the mode named first (default grid) gets the other arguments.

    python -m gltensor.bench --quick               # the suite (mode grid), as before modes existed
    python -m gltensor.bench single --sizes 1024   # another mode; `python -m gltensor.bench MODE --help`
    python -m gltensor.bench --upload              # the upload mode under the flag it had before modes existed
"""
import importlib
import sys

from . import MODES

DEFAULT = next(iter(MODES))
# Flags that named a mode before modes existed, kept so that saved commands still run.
MODE_FLAGS = {"--upload": "upload"}


def split_mode(argv):
    """(mode, the mode's arguments) of a command line."""
    argv = list(argv)
    if argv and argv[0] in MODES:
        return argv[0], argv[1:]
    for flag, mode in MODE_FLAGS.items():
        if flag in argv:
            argv.remove(flag)
            return mode, argv
    return DEFAULT, argv


def main(argv=None):
    mode, rest = split_mode(sys.argv[1:] if argv is None else argv)
    return importlib.import_module(MODES[mode][0]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
