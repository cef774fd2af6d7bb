"""``python -m spacrq`` is the ``spacrq`` command."""
import sys

from spacrq.cli import main

if __name__ == "__main__":
    sys.exit(main())
