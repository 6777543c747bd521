import sys

from tuner.cli import entry

sys.exit(entry())
