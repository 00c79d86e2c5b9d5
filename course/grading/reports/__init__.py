"""What the instructor reads of a graded class: which exercise the class failed, with which message, and the speed tests' leaderboard."""
