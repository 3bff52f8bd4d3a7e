"""The `attune` command line."""

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="attune", description=__doc__)
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args(argv)
    if args.version:
        from attune import __version__

        print(__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
