"""A compiled module whose functions each run in a process of their own, as the checks run them, so that a kernel
that crashes, hangs or writes outside its memory costs one cell, not the notebook (taught in grayscale/L3).

A CUDA kernel with a bug can take down the process that launched it (CPU mode's stray writes corrupt its heap;
a GPU's memory fault leaves its CUDA context unusable), and in a notebook that process is the kernel that holds
all of your work. `isolated(module).f(x)` sends x to a fresh process, calls f there and brings back what it
returned, with what it printed; if that process dies, the cell says how and why, and the notebook goes on.
`isolated(launch)(x)` does the same for a Triton launch function (its source goes to the process, as a check sends it).
"""
import types

import torch

from .harness.children import KernelFailed, call_in_child

TIMING_TIMEOUT = 300  # seconds for a timed run: a slow kernel's warm-up and repeats at 4096 take seconds


class IsolatedFunction:
    """A function of a compiled module, called in a child process; what it returns comes back to the arguments' device."""

    def __init__(self, module, name, loader=None, words=None):
        self.module, self.__name__, self.loader, self.words = module, name, loader, words

    def __call__(self, *args):
        value, printed = call_in_child(self.module, self.__name__, args, loader=self.loader, words=self.words)
        if printed.strip():
            print(printed.rstrip())  # the kernel's printf and the wrapper's output, as the function printed them
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        if device is None:
            return value
        if isinstance(value, tuple):
            return tuple(v.to(device) if isinstance(v, torch.Tensor) else v for v in value)
        return value.to(device) if isinstance(value, torch.Tensor) else value

    def time_in_child(self, *args, warmup=3, reps=20):
        """cuda_time of the function on args, measured in a process of its own (cuda_time(isolated_f, ...) calls it)."""
        ms, printed = call_in_child(self.module, self.__name__, args, timeout=TIMING_TIMEOUT, timing=(warmup, reps),
                                    loader=self.loader, words=self.words)
        return ms

    def __repr__(self):
        return f"<{self.__name__} of {getattr(self.module, '__name__', self.module)}, called in a process of its own>"


class IsolatedModule:
    """The module load_cuda returned, each of its functions called in a child process (see isolated)."""

    def __init__(self, module):
        self.module = module
        self.__name__, self.__file__ = module.__name__, module.__file__

    def __getattr__(self, name):
        value = getattr(self.module, name)
        return IsolatedFunction(self.module, name) if callable(value) else value

    def __dir__(self):
        return dir(self.module)

    def __repr__(self):
        return f"<isolated {self.module.__name__}: each call in a process of its own>"


class IsolatedLaunch(IsolatedFunction):
    """A Triton launch function called in a process of its own (course.isolated): its source goes there as a check
    sends it, and a crash or an error it raised reads in Triton's words, the kernel's line with it."""

    def __init__(self, fn):
        from .harness.rungs import TRITON
        from .harness.triton import source_of, written
        source = source_of(fn)
        self.source, self.path = source, written(source)
        super().__init__(self.path, source.name, loader="course.harness.triton:load", words=TRITON.words)

    def __call__(self, *args):
        from .harness.triton import crashed, explained
        try:
            return super().__call__(*args)
        except KernelFailed as e:
            if getattr(e, "output", None) is not None:
                raise crashed(self.__name__, e, self.path) from None
            said = explained(e, self.source.text)
            raise (e if said is e else KernelFailed(str(said))) from None


def isolated(module):
    """module (from load_cuda), or a Triton launch function, with each call run in a process of its own: a crash fails
    the cell, not the notebook."""
    if isinstance(module, (IsolatedModule, IsolatedFunction)):
        return module
    if isinstance(module, types.FunctionType):  # a launch function of @triton.jit kernels, sent as its source
        return IsolatedLaunch(module)
    return IsolatedModule(module)
