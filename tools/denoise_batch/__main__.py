"""python3 -m denoise_batch: the same as the denoise-batch command."""
import sys

from denoise_batch.cli import main

sys.exit(main(sys.argv[1:]))
