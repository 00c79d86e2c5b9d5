"""A one-node Slurm cluster on this machine (munged, slurmctld, slurmd, all its files in one folder), started for a test or a benchmark."""
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def tool(name):
    """A Slurm or munge program's path (the daemons are in /usr/sbin, which a user's PATH may leave out), or None."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def free_port():
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_prerequisite():
    """Why a local Slurm cannot be started here, or None."""
    absent = [d for d in DAEMONS if tool(d) is None]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: apt-get install slurm-wlm munge; .ci/slurm-deps does it)"
    if os.geteuid() != 0:
        return "slurmd runs jobs as their users and needs root here"
    return None


class LocalCluster:
    """A one-node Slurm cluster on this machine (munged, slurmctld, slurmd), all its files in one folder."""

    def __init__(self, folder, cpus=2):
        self.dir = Path(folder)
        self.cpus = cpus
        self.host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip() or \
            socket.gethostname().split(".")[0]
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs = {}

    def write_config(self):
        """slurm.conf for one node: no cgroups (proctrack/linuxproc, task/none), no accounting, ports of its own."""
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text("\n".join([
            "ClusterName=coursetest", f"SlurmctldHost={self.host}",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}", "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d / 'munge.socket'}",
            f"StateSaveLocation={d / 'state'}", f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}", f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}", f"SlurmdLogFile={d / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU", "MpiDefault=none", "ReturnToService=2",
            "KillWait=5", "MinJobAge=600", "MessageTimeout=30",  # a cancelled task dies within seconds; finished jobs stay in scontrol
            f"NodeName={self.host} CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP", ""]))
        (d / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")  # read, not used

    def start(self, timeout=60):
        """Starts munged, slurmctld and slurmd in the foreground of processes of ours; waits until the node is idle."""
        self.write_config()
        d = self.dir
        commands = {"munged": [tool("munged"), "-F", "--force", f"--socket={d / 'munge.socket'}",
                               f"--key-file={d / 'munge.key'}", f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
                               f"--seed-file={d / 'munged.seed'}"],
                    "slurmctld": [tool("slurmctld"), "-D", "-i"], "slurmd": [tool("slurmd"), "-D"]}
        for name, cmd in commands.items():
            self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=open(d / f"{name}.out", "w"),
                                                stderr=subprocess.STDOUT, start_new_session=True)
            if name == "munged":
                self._wait(lambda: (d / "munge.socket").exists(), 20, "munged did not open its socket")
        self._wait(lambda: self.run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle", timeout,
                   "the node did not become idle")
        return self

    def _wait(self, ready, timeout, what):
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"{p.name}: {p.read_text()[-1500:]}" for p in sorted(self.dir.glob("*.out")))
                raise RuntimeError(f"{what} ({', '.join(dead) or 'timeout'}):\n{logs}")
            time.sleep(0.5)

    def run(self, *cmd, check=False):
        """A Slurm command (sbatch, squeue, scancel...) on this cluster."""
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def wait_jobs(self, jobs, timeout):
        """Waits until none of the jobs is pending or running."""
        deadline = time.monotonic() + timeout
        while True:
            queue = self.run("squeue", "-h", "-j", ",".join(map(str, jobs)))
            if queue.returncode == 0 and not queue.stdout.strip():
                return
            # a busy controller answers "Socket timed out": that is not an empty queue
            assert time.monotonic() < deadline, queue.stdout + queue.stderr
            time.sleep(2)

    def stop(self):
        """Cancels every job, stops the daemons, and kills any step daemon left: nothing of the cluster keeps running."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--user", str(os.getuid()))
            deadline = time.monotonic() + 60
            while self.run("squeue", "-h").stdout.strip() and time.monotonic() < deadline:
                time.sleep(1)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for pid in self.leftovers():
            os.kill(pid, signal.SIGKILL)

    def leftovers(self):
        """Processes of this cluster still running: its daemons, and the step daemons of its jobs."""
        ours = {p.pid for p in self.procs.values()}
        found = set()
        for pattern in ("slurmstepd", "slurmd", "slurmctld", "munged"):
            out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
            found |= {int(x) for x in out.split()}
        mine = set()
        for pid in found - {os.getpid()}:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            # a step daemon's command line does not name our folder; on this machine nobody else runs Slurm
            if pid in ours or str(self.dir) in cmdline or cmdline.startswith("slurmstepd"):
                mine.add(pid)
        return sorted(mine)
