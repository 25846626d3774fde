"""A stand-in for nsys in tests of what tracekit does when nsys misbehaves.

FAKE_NSYS_MODE:
  agent  run the program, write the report, leave a spinning "agent" of this session, exit 0
  hang   run the program, write the report, then never exit
  slow   run the program, then wait for Ctrl-C (SIGINT): write the report and exit 130
  stream run the program, leave only a raw .qdstrm (an nsys without its importer), saying so as nsys 2022.4 does
  nostart never start the program (an nsys stuck before launching it)
  plain  run the program, write the report, exit 0; on SIGINT write the report at once and exit 130,
         leaving the program to whoever started nsys
  streamint  as plain, but on SIGINT leave only a raw .qdstrm (the recording, for the importer)
  subreaper  as real nsys: adopt the program's orphaned children and wait for all of them before writing
FAKE_NSYS_SIGNALS: a file to which every SIGINT received appends a line (so a test can count them).
FAKE_NSYS_REPORT and FAKE_NSYS_EXPORT are the files `profile` and `export` copy into place.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

args = sys.argv[1:]
mode = os.environ.get("FAKE_NSYS_MODE", "agent")
if args[:1] == ["--version"]:
    print("NVIDIA Nsight Systems version 2099.1.0-fake")
elif args[:1] == ["export"]:
    shutil.copy(os.environ["FAKE_NSYS_EXPORT"], args[args.index("--output") + 1])
elif args[:1] == ["profile"]:
    output = args[args.index("--output") + 1]
    rest = args[args.index("--output") + 2 :]
    program = rest[next(index for index, arg in enumerate(rest) if not arg.startswith("-")) :]
    report = output + ".nsys-rep"
    interrupted = []

    def on_sigint(*_):
        interrupted.append(True)
        if os.environ.get("FAKE_NSYS_SIGNALS"):
            with open(os.environ["FAKE_NSYS_SIGNALS"], "a") as log:
                log.write("SIGINT\n")

    signal.signal(signal.SIGINT, on_sigint)
    if mode == "stream":
        print("Importer error status: The importer binary and its dependencies were not found.", flush=True)
        print("Unable to retrieve the importer version: skipping importation of the QDSTRM file.", flush=True)
    if mode == "subreaper":
        import ctypes

        ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of the program become ours
    if mode == "nostart":
        while True:
            time.sleep(1)
    child = subprocess.Popen(program)
    while child.poll() is None:
        if interrupted and mode == "plain":  # write what was collected and exit, leaving the program running
            shutil.copy(os.environ["FAKE_NSYS_REPORT"], report)
            sys.exit(130)
        if interrupted and mode == "streamint":  # the raw recording only, as an nsys without its importer
            with open(output + ".qdstrm", "wb") as handle:
                handle.write(b"raw capture stream")
            sys.exit(130)
        time.sleep(0.05)
    if mode == "subreaper":  # real nsys waits for the whole tree: the program's leftover children too
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        shutil.copy(os.environ["FAKE_NSYS_REPORT"], report)
        sys.exit(child.returncode)
    if mode == "slow":
        open(output + ".profiling", "w").close()
        while not interrupted:
            time.sleep(0.05)
        shutil.copy(os.environ["FAKE_NSYS_REPORT"], report)
        sys.exit(130)
    if mode == "stream":  # as Debian's nsys 2022.4 does, its words included
        with open(output + ".qdstrm", "wb") as handle:
            handle.write(b"raw capture stream")
        print("Generated:\n    " + output + ".qdstrm", flush=True)
        sys.exit(0)
    if os.environ.get("FAKE_NSYS_NOISE"):  # what real nsys prints when its importer is missing
        print("ERROR: QdstrmImporter could not be found (error 2)", flush=True)
    shutil.copy(os.environ["FAKE_NSYS_REPORT"], report)
    if mode == "agent":  # a detached process named as nsys names its agents, spinning
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass", f"--session-name=profile-python-{os.getpid()}"],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    if mode == "hang":
        while True:
            time.sleep(1)
    sys.exit(child.returncode)  # nsys returns the program's exit status
