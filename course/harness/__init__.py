"""The check machinery every topic shares: an exercise as data, and one runner for Python rungs and one for CUDA.

exercise.py  what a topic declares: cases, reference comparison, output dtype, hints
python.py    the Python rungs' runner (time limit, quiet, pre-filled outputs)
cuda.py      the CUDA rung's runner: a child process per check, verdicts judged outside it
triton.py    the Triton rung's runner: a launch function sent as source to those children (interpreted in CPU mode)
child.py     what runs in that child; forkserver.py starts children from a warm process
integrity.py which kernels and PyTorch operations a profiled call ran
rungs.py     a rung as a plug-in: its size table, runner, check modes, integrity rule and how an answer is collected
"""
