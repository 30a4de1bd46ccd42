"""Write torchrun's output for two launches that fail before any rank
runs, as tests/test_explain.py reads them (README.md beside this file):

    .venv/bin/python tests/data/explain/launch_logs.py tests/data/explain

Each is a real torchrun (torch 2.13, this venv) on loopback, on a port
the system gave and let go of; each waits out its timeout (about 30 s
each on a loaded 2-core machine, startup included), which is why the
tests read the files rather than run them. The script the ranks would
run is never reached.
"""
import os
import pathlib
import socket
import subprocess
import sys
import tempfile

TORCHRUN = pathlib.Path(sys.executable).with_name("torchrun")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, folder):
    script = pathlib.Path(folder) / "never_reached.py"
    script.write_text("print('a rank ran')\n")
    done = subprocess.run([str(TORCHRUN), *args, str(script)],
                          capture_output=True, text=True, timeout=300,
                          cwd=folder)
    return done.stdout + done.stderr


def main(out):
    with tempfile.TemporaryDirectory() as folder:
        # Node 0 of two, static rendezvous: node 1 never starts.
        static = run(["--nnodes", "2", "--node-rank", "0",
                      "--nproc-per-node", "1", "--master-addr",
                      "127.0.0.1", "--master-port", str(free_port()),
                      "--rdzv-conf", "timeout=5"], folder)
        # One of two nodes, c10d rendezvous: join_timeout runs out.
        c10d = run(["--nnodes", "2", "--nproc-per-node", "1",
                    "--rdzv-backend", "c10d", "--rdzv-endpoint",
                    f"127.0.0.1:{free_port()}", "--rdzv-conf",
                    "join_timeout=5"], folder)
    for name, text in (("torchrun_static_rendezvous.log", static),
                       ("torchrun_rendezvous_timeout.log", c10d)):
        # The venv's path is this machine's, not the reader's.
        prefix = os.path.dirname(os.path.dirname(sys.executable))
        (pathlib.Path(out) / name).write_text(text.replace(prefix,
                                                           "/venv"))


if __name__ == "__main__":
    main(sys.argv[1])
