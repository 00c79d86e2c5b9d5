"""`python -m course COMMAND`: the instructor's commands (course/grading/cli.py)."""
import sys

from course.grading.cli import main

sys.exit(main())
