"""What nbgrader_config.py plugs into nbgrader: the trusted execute step, the kernel's sandbox, hidden tests and their per-student seeds, release's C stubs, feedback's hidden-test and speed lines."""
