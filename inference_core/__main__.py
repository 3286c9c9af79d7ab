import os
import sys

# A process starts here, so its process-wide settings are set here, before torch loads OpenMP: waiting
# OpenMP threads that spin steal the core a descheduled sibling needs (on 2 shared cores, batch-1 decode ran
# at 4 tok/s spinning and 23 tok/s with PASSIVE). The environment still wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .cli.main import main  # noqa: E402

sys.exit(main())
