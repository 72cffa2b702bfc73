"""What the Python tests that drive the kiln binary share: named checks that record their
failures, and a run of `kiln` that must end with an expected exit code."""
import subprocess

failures = []


def check(cond, what):
    """Prints `what` as passed or failed; a failure is recorded and the test goes on."""
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def kiln(binary, *args, expect=0):
    """Runs `binary args...`; returns its stderr; stops the test when its exit code is not `expect`."""
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != expect:
        print(r.stdout, r.stderr)
        raise SystemExit("kiln %s: exit %d, expected %d" % (" ".join(args), r.returncode, expect))
    return r.stderr
