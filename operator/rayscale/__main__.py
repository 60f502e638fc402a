import sys

from rayscale.cli import main

sys.exit(main())
