import sys

from codeloupe.cli import main

sys.exit(main())
