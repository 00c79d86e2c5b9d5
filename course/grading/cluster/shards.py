"""The shards of `course grade --shard i/N` in a course folder: each a gradebook and ledger of its own under
autograded/.course/<assignment>/shard-i-of-N/ (layout.shard_dir), found here for `course merge` and `course slurm`."""
import re

from ..run.layout import shard_name, state_dir

_SHARD = re.compile(r"shard-(\d+)-of-(\d+)$")


def shard_dirs(root, assignment):
    """[(i, N, folder)] of the shards graded in a course folder."""
    base = state_dir(root, assignment, make=False)
    found = []
    for d in sorted(base.glob(shard_name("*", "*"))) if base.is_dir() else []:
        m = _SHARD.search(d.name)
        if m and (d / "gradebook.db").exists():
            found.append((int(m.group(1)), int(m.group(2)), d))
    return found
