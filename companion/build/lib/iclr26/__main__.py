import sys

from iclr26.cli import main

sys.exit(main())
