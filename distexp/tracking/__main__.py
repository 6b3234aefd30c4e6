"""`python -m distexp.tracking import <job_dir>`: replay a job's offline file into its run."""
import sys

from distexp.tracking.offline import main

if __name__ == "__main__":
    sys.exit(main())
