import sys

from normtrain.ablate.cli import main

sys.exit(main())
