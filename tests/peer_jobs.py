"""Starting a small job whose PEs fail on purpose, and watching it end: the helper of the tests of
a PE that dies, stops, raises, skips a call or finalizes while its peers wait.

`Job` starts `n` PEs of `code` the way torchrun would (its variables, a fresh port), lets a test
signal one PE once that PE printed a line, and collects every PE's exit status, output and the
time it exited. `backend="cuda"` runs them on the GPU backend, sharing one GPU when there is one."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass

from conftest import free_port

# Short enough that a test whose job hangs fails in seconds, long enough for a loaded CI machine.
BOOTSTRAP_TIMEOUT_S = "20"


@dataclass
class Ended:
    """One PE of a finished job."""

    returncode: int
    stdout: str
    stderr: str
    # Seconds from the job's start until the process was seen to have exited.
    exited_after: float


class Job:
    def __init__(self, code: str, n: int = 2, env: dict | None = None, backend: str = "host"):
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "RSHMEM_")) and k not in (
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")}
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                    RSHMEM_BOOTSTRAP_TIMEOUT_S=BOOTSTRAP_TIMEOUT_S, RSHMEM_BACKEND=backend, PYTHONUNBUFFERED="1")
        if backend == "cuda":
            base["RSHMEM_ALLOW_SHARED_GPU"] = "1"
        base.update(env or {})
        self.started = time.monotonic()
        self.procs = [
            subprocess.Popen([sys.executable, "-c", code], env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(n)
        ]
        self._seen = ["" for _ in range(n)]

    def wait_for_line(self, pe: int, text: str, timeout: float = 30.0) -> float:
        """Reads PE `pe`'s output until a line contains `text`; returns the time it came."""
        p = self.procs[pe]
        deadline = time.monotonic() + timeout
        while text not in self._seen[pe]:
            left = deadline - time.monotonic()
            ready = select.select([p.stdout], [], [], max(0.0, min(left, 0.2)))[0] if left > 0 else []
            # The file descriptor itself: a buffered readline could keep a second line from select.
            got = os.read(p.stdout.fileno(), 1 << 16).decode(errors="replace") if ready else ""
            self._seen[pe] += got
            if left <= 0 or ready and not got:  # out of time, or the PE closed its output
                self.kill_all()
                raise AssertionError(f"PE {pe} never printed {text!r}; output so far:\n{self._seen[pe]}")
        return time.monotonic()

    def signal(self, pe: int, sig: int) -> float:
        os.kill(self.procs[pe].pid, sig)
        return time.monotonic()

    def stopped(self, pe: int) -> bool:
        """Whether PE `pe` is stopped (SIGSTOP), from /proc."""
        with open(f"/proc/{self.procs[pe].pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()

    def finish(self, timeout: float = 60.0) -> list[Ended]:
        """Waits until every PE exited (killing them all at `timeout`, which the output then says);
        each PE's exit time is noted when it is seen, all PEs being polled together."""
        deadline = time.monotonic() + timeout
        exited = [None] * len(self.procs)
        while any(e is None for e in exited) and time.monotonic() < deadline:
            for i, p in enumerate(self.procs):
                if exited[i] is None and p.poll() is not None:
                    exited[i] = time.monotonic() - self.started
            time.sleep(0.02)
        timed_out = any(e is None for e in exited)
        self.kill_all()
        ended = []
        for i, p in enumerate(self.procs):
            out, err = p.communicate()
            if exited[i] is None:
                err += "\nTIMED OUT: the PE was still running and was killed"
                exited[i] = time.monotonic() - self.started
            ended.append(Ended(p.returncode, self._seen[i] + out, err, exited[i]))
        if timed_out:
            report = "\n".join(f"--- PE {i} (exit {e.returncode}):\n{e.stdout}\n{e.stderr}" for i, e in enumerate(ended))
            raise AssertionError(f"the job did not end within {timeout} s:\n{report}")
        return ended


def describe(ended: list[Ended]) -> str:
    return "\n".join(f"--- PE {i} (exit {e.returncode} after {e.exited_after:.2f} s):\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}"
                     for i, e in enumerate(ended))


# docs/errors.md: a peer's death or departure is seen within this long by every blocking call.
SEEN_WITHIN_S = 5.0


def finalize_while_waiting(prelude: str, setup: str, call: str, after_s: float) -> str:
    """A program whose PE 1 finalizes `after_s` after a barrier while PE 0 waits in `call` (made
    by `setup`); each prints when (`PE 1 FINALIZED t`, `RAISED t message` or `NO ERROR`)."""
    return prelude + f"""
{setup}
rshmem.barrier_all()
if me == 1:
    time.sleep({after_s})
    left_at = time.time()
    rshmem.finalize()
    print("PE 1 FINALIZED", left_at, flush=True)
else:
    try:
        {call}
    except rshmem.PeerExitedError as e:
        print("RAISED", time.time(), e, flush=True)
    else:
        print("NO ERROR", flush=True)
"""


def wait_on_device(call: str) -> str:
    """The end of a GPU program whose start imports os, time, torch and rshmem and sets `started`:
    this PE makes `call` (one line, e.g. a kernel's wait) and synchronizes the device, printing
    `CUDA SAYS <error type>` if CUDA raised; then, if rshmem's device error check raises (a kernel's
    wait stopped), prints `RAISED <seconds since started> <error type> <message>` and exits 3, else
    prints `NO ERROR`."""
    return f"""try:
    {call}
    torch.cuda.synchronize()
except Exception as e:
    print("CUDA SAYS", type(e).__name__, flush=True)
try:
    rshmem._native.check_device_error()
except rshmem.RshmemError as e:
    print("RAISED", time.time() - started, type(e).__name__, e, flush=True)
    os._exit(3)
print("NO ERROR", flush=True)
"""


def assert_leaving_seen(ended: list, call: str) -> None:
    """PE 0 of a `finalize_while_waiting` job raised PeerExitedError naming PE 1's finalize and
    `call`, within SEEN_WITHIN_S of it; both exited 0."""
    assert all(e.returncode == 0 for e in ended), describe(ended)
    out = ended[0].stdout
    assert "RAISED" in out and "NO ERROR" not in out, describe(ended)
    message = out.split("RAISED", 1)[1]
    assert "PE 1 left the job (rshmem.finalize())" in message and call in message, describe(ended)
    left_at = float(ended[1].stdout.split("PE 1 FINALIZED", 1)[1].split()[0])
    assert float(message.split()[0]) - left_at < SEEN_WITHIN_S, describe(ended)
