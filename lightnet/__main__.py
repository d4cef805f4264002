import sys

from lightnet.cli import main

sys.exit(main())
