import sys

from normtrain.compare.cli import main

sys.exit(main())
