"""``python -m xlat sweep ...``: the sweep runner the ``xlat sweep --ray`` command delegates to."""

import sys

from ._sweep import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "sweep":
        print("usage: python -m xlat sweep SWEEP.toml [--out DIR] [--jobs N] [--ray ADDRESS]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[1:]))
