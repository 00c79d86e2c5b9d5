"""The instructor's side: release, collect, grade, feedback, export, and the nbgrader plug-ins (course/grading/cli.py lists the commands)."""
