"""``python -m spacrq`` is the ``spacrq`` command."""
import sys

from spacrq.cli import command

if __name__ == "__main__":
    sys.exit(command())
