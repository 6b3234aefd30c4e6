"""``python -m distexp.report``."""
import sys

from distexp.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
