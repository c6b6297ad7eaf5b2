"""ANeuralNetworksEvent: completion of an asynchronous computation, optionally backed by a
pollable Linux file descriptor (an eventfd) that plays the role of a sync fence."""
import os
import select
import sys
import threading

from . import constants as C
from .errors import bad_data


class _FdEvent:
    """What both kinds of event do with their fd (-1: none)."""
    fd = -1

    def get_fd(self):
        """A duplicate of the sync fence for the caller (Event_getSyncFenceFd); BAD_DATA when
        there is none to give, as Android 14 answers an fd it cannot duplicate."""
        if self.fd < 0:
            raise bad_data("the event is not backed by a sync fence")
        try:
            return os.dup(self.fd)
        except OSError as e:
            raise bad_data(f"cannot duplicate the event's sync fence fd {self.fd}: {e.strerror}") from None

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Event(_FdEvent):
    """Signalled once; status is the computation's result code."""

    def __init__(self, with_fence=False):
        self._done = threading.Event()
        self.status = None
        self.reason = ""          # why the computation failed (recorded on the worker's thread)
        self.fd = os.eventfd(0, os.EFD_CLOEXEC) if with_fence else -1

    def signal(self, status, reason=""):
        self.status = status
        self.reason = reason
        if self.fd >= 0:
            os.eventfd_write(self.fd, 1)     # before waking waiters: Event_free may close it next
        self._done.set()

    def wait(self):
        self._done.wait()
        return self.status

    def done(self):
        return self._done.is_set()

    def failed(self):
        return self._done.is_set() and self.status != C.NO_ERROR


class FenceEvent(_FdEvent):
    """An event made from a caller's pollable fd (sync fence): signalled when it is readable."""

    def __init__(self, fd):
        if fd < 0:
            raise bad_data(f"invalid sync fence fd {fd}")
        try:
            self.fd = os.dup(fd)
        except OSError as e:
            raise bad_data(f"cannot duplicate sync fence fd {fd}: {e.strerror}") from None
        self.status = None

    def wait(self):
        if self.status is None:
            p = select.poll()
            p.register(self.fd, select.POLLIN | select.POLLERR | select.POLLHUP)
            while True:
                ev = p.poll()
                if ev:
                    self.status = C.OP_FAILED if ev[0][1] & select.POLLERR else C.NO_ERROR
                    break
        return self.status

    def done(self):
        if self.status is not None:
            return True
        p = select.poll()
        p.register(self.fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(p.poll(0))

    def failed(self):
        return self.done() and self.wait() != C.NO_ERROR


class _Pool:
    """Daemon worker threads for asynchronous computations; grows when all are busy so a
    computation waiting on a dependency can never starve the one it waits for."""

    def __init__(self):
        import queue
        self.q = queue.SimpleQueue()
        self.idle = 0
        self.lock = threading.Lock()
        self.frames = []            # each worker's own frame object (see _worker)

    def submit(self, fn):
        with self.lock:
            if self.idle > 0:
                self.idle -= 1
                spawn = False
            else:
                spawn = True
        self.q.put(fn)
        if spawn:
            threading.Thread(target=self._worker, name="nnapi_py-worker", daemon=True).start()

    def _worker(self):
        # CPython keeps a running frame's object (made once a traceback or a callee's frame object
        # needs it) only in the thread's frame stack, which it maps itself: a leak checker of the
        # host (LeakSanitizer, valgrind) does not scan that memory and would report this frame,
        # live for the worker's whole life, as leaked.  The pool's list points at it from memory
        # the checker scans; one frame object a worker thread, made at its start.
        self.frames.append(sys._getframe())
        q = self.q
        while True:
            fn = q.get()
            try:
                fn()
            except BaseException:   # the task records its own status; never kill the worker
                pass
            fn = None               # an idle worker keeps nothing alive (memories, their fds)
            with self.lock:
                self.idle += 1


pool = _Pool()

# ---- process exit ------------------------------------------------------------------------
# halted[0] becomes True when the process exits (atexit): kernels already running finish,
# no new kernel starts (the thread parks), so library destructors never run under a kernel.
# _inside holds one entry per run in progress: list.append and list.pop are each one call
# into the list object, atomic under the GIL (and under a free-threaded build's per-object
# lock), so no lock is taken (a lock's acquire and release cost ~0.7 us a run each way).
halted = [False]
_inside = []
_never = threading.Event()


def enter_run():
    _inside.append(None)


def leave_run():
    _inside.pop()


def park():
    """Called between kernels once the process is exiting: never returns."""
    leave_run()
    while True:
        _never.wait(3600)


def shutdown(timeout=10.0):
    import time
    from . import profiling
    profiling.report()
    halted[0] = True
    end = time.monotonic() + timeout
    while _inside and time.monotonic() < end:
        time.sleep(0.002)
