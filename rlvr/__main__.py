"""`python -m rlvr ...` (and `torchrun ... -m rlvr train ...`) is the `rlvr` command."""
import sys

from rlvr.cli import main

sys.exit(main())
