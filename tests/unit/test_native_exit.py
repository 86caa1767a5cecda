"""A process must exit cleanly while a daemon thread waits in the native extension with the GIL
released: the follower stopped by SIGTERM while its Kafka producer's ``init_transactions`` ran in
the ``kafka-init`` thread aborted with ``FATAL: exception not rethrown`` (SIGABRT, exit -6 instead
of 130; CI of fed0961). On Python 3.11 a thread that takes the GIL back during finalization is
ended by ``pthread_exit``, whose forced unwind PyO3 before 0.29 let run across Rust frames; 0.29
hangs such a thread instead (PyO3 #6085), and the process exits with its own code."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.prereq import missing

#: the thread returns from the extension (after 1 s) while the main thread is finalizing (a module
#: whose teardown takes 3 s keeps finalization open); the broker address refuses connections
SCRIPT = textwrap.dedent("""
    import os, sys, threading, time, types
    import sluice_binlog
    started = threading.Event()
    def wait_in_native():
        p = sluice_binlog.TxProducer([("bootstrap.servers", "127.0.0.1:1"), ("transactional.id", "t")])
        started.set()
        try:
            p.init_transactions(1.0)
        except Exception:
            pass
    threading.Thread(target=wait_in_native, daemon=True).start()
    started.wait()
    time.sleep(0.2)  # the thread is inside init_transactions, the GIL released
    class Slow:
        def __del__(self, sleep=time.sleep):
            sleep(3)
    teardown = types.ModuleType("teardown")
    teardown.slow = Slow()
    sys.modules["teardown"] = teardown
    sys.exit(130)
""")


def test_a_thread_leaving_the_extension_during_exit_does_not_abort_the_process():
    try:
        import sluice_binlog
    except ImportError:
        missing("the native capture extension is not built (scripts/bootstrap)")
    if not hasattr(sluice_binlog, "TxProducer"):
        missing("the native extension was built without its Kafka producer")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert "exception not rethrown" not in done.stderr
