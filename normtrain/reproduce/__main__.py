import sys

from normtrain.reproduce.cli import main

sys.exit(main())
