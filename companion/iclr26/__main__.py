import sys

from iclr26.book.cli import main

sys.exit(main())
