#!/usr/bin/env python3
"""deploy_manifests_test: deploy/farm and deploy/board stay true to the programs they start.

  python3 deploy_manifests_test.py --kilnd BIN --agent BIN --worker BIN --deploy deploy/farm \
      --board deploy/board

Checks that every YAML (all documents) and JSON file under --deploy parses; that the systemd
units parse (sections, keys, an ExecStart); that every --flag passed to kilnd, kiln-agent or
kiln-worker (ExecStart lines, Kubernetes command/args) is in that binary's --help; that the
Kubernetes ports agree with the flags (containerPort, Service targetPort, probes, the workers'
--tracker); and that kilnd's --state, --token-file and TLS files lie on mounted volumes, the
state on a PersistentVolumeClaim. Where installed, `systemd-analyze verify` checks the units and
`kubectl kustomize` the kustomization. Each failure names the file and the flag; exit 1 on any.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    sys.exit("deploy_manifests_test needs PyYAML (scripts/setup.sh installs it: pip install pyyaml)")

PROGRAMS = {"kilnd": "kilnd", "kiln-agent": "agent", "kiln-worker": "worker"}
failures = []


def fail(path, msg):
    failures.append(f"{path}: {msg}")


def help_flags(binary):
    """The --flags a binary's --help names (read at test time: flags may be added)."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        sys.exit(f"{binary} --help exited {out.returncode}: {out.stderr}")
    return set(re.findall(r"--[a-z][a-z0-9-]*", out.stdout + out.stderr))


def program_of(word):
    """'kilnd' for '/usr/local/bin/kilnd', None for anything that is not one of ours."""
    base = os.path.basename(word)
    return base if base in PROGRAMS else None


def flags_in(argv):
    """(flag, value) for each --flag in argv; value is the next word or after '='."""
    result = []
    for i, word in enumerate(argv):
        if not word.startswith("--"):
            continue
        if "=" in word:
            flag, value = word.split("=", 1)
        else:
            flag = word
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
        result.append((flag, value))
    return result


def check_flags(path, program, argv, known):
    for flag, _ in flags_in(argv):
        if flag not in known[program]:
            fail(path, f"{program} has no flag {flag} (not in `{program} --help`)")


# --- systemd units ------------------------------------------------------------------------------

def parse_unit(file, path):
    """{section: [(key, value)]} of the unit at `file`, continuation lines (trailing backslash)
    joined; failures name `path`."""
    sections, current, pending = {}, None, ""
    with open(file) as f:
        for n, raw in enumerate(f, 1):
            line = pending + raw.rstrip("\n")
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if s.startswith("[") and s.endswith("]"):
                current = s[1:-1]
                sections.setdefault(current, [])
            elif "=" in s and current is not None:
                key, value = s.split("=", 1)
                sections[current].append((key.strip(), value.strip()))
            else:
                fail(path, f"line {n}: neither a [section] nor key=value: {s!r}")
    if pending:
        fail(path, "ends with a continuation backslash")
    return sections


def check_unit(file, path, known):
    """Checks the unit at `file`; failures name `path`. Returns the program it runs."""
    sections = parse_unit(file, path)
    for need in ("Unit", "Service", "Install"):
        if need not in sections:
            fail(path, f"no [{need}] section")
    service = dict(sections.get("Service", []))
    exec_start = [v for k, v in sections.get("Service", []) if k == "ExecStart"]
    if len(exec_start) != 1:
        fail(path, f"wants one ExecStart, has {len(exec_start)}")
        return
    argv = exec_start[0].split()
    program = program_of(argv[0].lstrip("-@:+!"))
    if program is None:
        fail(path, f"ExecStart runs {argv[0]}, not one of {sorted(PROGRAMS)}")
        return
    if not argv[0].startswith("/"):
        fail(path, f"ExecStart needs an absolute path, has {argv[0]}")
    check_flags(path, program, argv, known)
    if service.get("Restart") != "on-failure":
        fail(path, "Restart= is not on-failure")
    if service.get("User") in (None, "root"):
        fail(path, "runs as root (no User=)")
    values = dict(flags_in(argv))
    if program == "kilnd":
        for flag in ("--listen", "--http", "--state", "--token-file"):
            if flag not in values:
                fail(path, f"kilnd's ExecStart lacks {flag}")
        state = values.get("--state")
        if state and not state.startswith("/var/lib/" + service.get("StateDirectory", "\0")):
            fail(path, f"--state {state} is not the unit's StateDirectory=")
    if program == "kiln-agent":
        for flag in ("--tracker", "--key", "--target", "--token-file"):
            if flag not in values:
                fail(path, f"kiln-agent's ExecStart lacks {flag}")
    return program


def verify_units(units, binaries):
    """systemd-analyze verify (where installed): unknown keys, bad values, bad specifiers. The
    units' /usr/local/bin paths become the binaries under test, a template gets an instance."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        print("note: no systemd-analyze here, the units' keys are not verified by systemd")
        return
    with tempfile.TemporaryDirectory(prefix="deploy_units_") as tmp:
        copies = {}
        for path, rel in units:
            with open(path) as f:
                text = f.read()
            for program, binary in binaries.items():
                text = text.replace("/usr/local/bin/" + program + " ", os.path.abspath(binary) + " ")
            name = os.path.basename(path).replace("@.", "@board.")
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
            copies[os.path.join(tmp, name)] = rel
        for copy, rel in copies.items():
            out = subprocess.run([tool, "verify", copy], capture_output=True, text=True,
                                 timeout=60, env=dict(os.environ, SYSTEMD_LOG_LEVEL="info"))
            lines = (out.stdout + out.stderr).splitlines()
            about_unit = [line for line in lines if copy in line]
            for line in about_unit:
                fail(rel, "systemd-analyze verify: " + line.replace(copy, rel))
            if out.returncode != 0 and not about_unit:  # the tool itself, not the unit
                print(f"note: systemd-analyze verify {rel} exited {out.returncode}: {lines}")


def check_kustomize(k8s_dir):
    """kubectl kustomize (where installed) builds the manifests the README applies."""
    tool = shutil.which("kubectl")
    if tool is None or not os.path.exists(os.path.join(k8s_dir, "kustomization.yaml")):
        return
    out = subprocess.run([tool, "kustomize", k8s_dir], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        fail("k8s/kustomization.yaml", "kubectl kustomize: " + out.stderr.strip())


# --- Kubernetes ---------------------------------------------------------------------------------

def pod_spec(doc):
    spec = doc.get("spec") or {}
    return (spec.get("template") or {}).get("spec")


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def mounted(path, mounts):
    """The volumeMount whose mountPath holds `path`, or None."""
    best = None
    for m in mounts:
        root = m["mountPath"].rstrip("/")
        if path == root or path.startswith(root + "/"):
            if best is None or len(root) > len(best["mountPath"].rstrip("/")):
                best = m
    return best


def check_k8s(docs_by_file, known):
    services = {}  # name -> {port name or number: (port, targetPort)}
    workloads = []  # (path, doc)
    for path, docs in docs_by_file.items():
        for doc in docs:
            if not isinstance(doc, dict) or "kind" not in doc:
                continue
            if doc["kind"] == "Service":
                services[doc["metadata"]["name"]] = (path, doc)
            if pod_spec(doc) is not None:
                workloads.append((path, doc))

    kilnd_ports = {}  # "grpc" / "http" -> port number, from kilnd's flags
    for path, doc in workloads:
        spec = pod_spec(doc)
        claims = {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            argv = list(c.get("command", [])) + [str(a) for a in c.get("args", [])]
            program = next((program_of(w) for w in argv if program_of(w)), None)
            if program is None:
                continue
            where = f"{path} ({doc['kind']} {doc['metadata']['name']}, container {c['name']})"
            check_flags(where, program, argv, known)
            values = dict(flags_in(argv))
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            mounts = c.get("volumeMounts", [])
            for flag in ("--token-file", "--tls-ca", "--tls-cert", "--tls-key", "--state"):
                if flag in values:
                    m = mounted(values[flag], mounts)
                    if m is None:
                        fail(where, f"{flag} {values[flag]} is on no volumeMount")
                    elif m["name"] not in volumes and m["name"] not in claims:
                        fail(where, f"{flag}: volumeMount {m['name']} names no volume")
            if program == "kilnd":
                if doc["kind"] not in ("StatefulSet", "Deployment"):
                    fail(where, f"kilnd in a {doc['kind']}")
                if doc["spec"].get("replicas", 1) != 1:
                    fail(where, "kilnd needs replicas: 1 (one RocksDB)")
                for flag, name in (("--listen", "grpc"), ("--http", "http")):
                    if flag not in values:
                        fail(where, f"kilnd lacks {flag}")
                        continue
                    want = port_of(values[flag])
                    kilnd_ports[name] = want
                    if want not in ports.values():
                        fail(where, f"{flag} {values[flag]}: no containerPort {want}")
                    elif ports.get(name) != want:
                        fail(where, f"{flag} {values[flag]}: containerPort '{name}' is {ports.get(name)}")
                state = values.get("--state")
                m = mounted(state, mounts) if state else None
                if state is None:
                    fail(where, "kilnd lacks --state")
                elif m is None or m["mountPath"].rstrip("/") != state.rstrip("/"):
                    fail(where, f"--state {state} is not a volumeMount's mountPath")
                else:
                    v = volumes.get(m["name"], {})
                    if m["name"] not in claims and "persistentVolumeClaim" not in v:
                        fail(where, f"--state {state}: volume {m['name']} is no PersistentVolumeClaim")
                for probe in ("readinessProbe", "livenessProbe"):
                    get = (c.get(probe) or {}).get("httpGet")
                    if not get:
                        fail(where, f"no {probe}.httpGet")
                        continue
                    p = get["port"]
                    p = ports.get(p) if isinstance(p, str) else p
                    if p != kilnd_ports.get("http") or get.get("path") != "/metrics":
                        fail(where, f"{probe} is not GET /metrics on the --http port")
            if program == "kiln-worker" and doc["kind"] == "Deployment":
                hpas = [d for ds in docs_by_file.values() for d in ds
                        if isinstance(d, dict) and d.get("kind") == "HorizontalPodAutoscaler"
                        and d["spec"]["scaleTargetRef"]["name"] == doc["metadata"]["name"]]
                if not hpas:
                    fail(where, "no HorizontalPodAutoscaler scales the workers")

    # The Service exposes kilnd's ports, and workers reach the tracker through it.
    if "kilnd" not in services:
        fail("k8s", "no Service named kilnd")
        return
    spath, svc = services["kilnd"]
    by_name = {}
    for p in svc["spec"]["ports"]:
        target = p.get("targetPort", p["port"])
        by_name[p.get("name")] = (p["port"], target)
    for name, want in kilnd_ports.items():
        if name not in by_name:
            fail(spath, f"Service kilnd has no port '{name}' for kilnd's {want}")
            continue
        port, target = by_name[name]
        if target not in (name, want) or port != want:
            fail(spath, f"Service kilnd port '{name}' is {port}->{target}, kilnd's flag says {want}")
    for path, doc in workloads:
        for c in pod_spec(doc).get("containers", []):
            argv = list(c.get("command", [])) + [str(a) for a in c.get("args", [])]
            values = dict(flags_in(argv))
            if "--tracker" in values:
                host, port = values["--tracker"].rsplit(":", 1)
                if host.split(".")[0] != "kilnd" or int(port) != kilnd_ports.get("grpc"):
                    fail(path, f"--tracker {values['--tracker']} is not Service kilnd's gRPC port "
                               f"{kilnd_ports.get('grpc')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnd", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--board", help="deploy/board: what a board runs (its systemd unit)")
    args = ap.parse_args()
    known = {"kilnd": help_flags(args.kilnd), "kiln-agent": help_flags(args.agent),
             "kiln-worker": help_flags(args.worker)}

    yaml_docs, units, jsons = {}, [], []
    for root, _, files in os.walk(args.deploy):
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, args.deploy)
            if name.endswith((".yaml", ".yml")):
                try:
                    with open(path) as f:
                        yaml_docs[rel] = [d for d in yaml.safe_load_all(f) if d is not None]
                except yaml.YAMLError as e:
                    fail(rel, f"not valid YAML: {e}")
            elif name.endswith(".json"):
                try:
                    with open(path) as f:
                        json.load(f)
                    jsons.append(rel)
                except ValueError as e:
                    fail(rel, f"not valid JSON: {e}")
            elif name.endswith(".service"):
                units.append((path, rel))

    if args.board:
        for name in sorted(os.listdir(args.board)):
            if name.endswith(".service"):
                units.append((os.path.join(args.board, name), os.path.join("..", "board", name)))
    unit_programs = {check_unit(path, rel, known) for path, rel in sorted(units)}
    for need in PROGRAMS:
        if need not in unit_programs:
            fail(args.deploy, f"no systemd unit runs {need}")
    verify_units(units, {"kilnd": args.kilnd, "kiln-agent": args.agent, "kiln-worker": args.worker})
    check_kustomize(os.path.join(args.deploy, "k8s"))
    k8s = {p: d for p, d in yaml_docs.items() if p.startswith("k8s" + os.sep)}
    if not k8s:
        fail(args.deploy, "no Kubernetes manifests under k8s/")
    check_k8s(k8s, known)
    if "prometheus.yml" not in yaml_docs:
        fail(args.deploy, "no prometheus.yml")
    else:
        jobs = yaml_docs["prometheus.yml"][0].get("scrape_configs", [])
        if not any(j.get("metrics_path", "/metrics") == "/metrics" for j in jobs):
            fail("prometheus.yml", "no scrape config for /metrics")
        # Static targets scrape kilnd's --http port (the one kilnd.service passes).
        http_ports = {port_of(v) for path, rel in units
                      for k, e in parse_unit(path, rel).get("Service", []) if k == "ExecStart"
                      for f, v in flags_in(e.split()) if f == "--http" and v}
        for j in jobs:
            for sc in j.get("static_configs", []):
                for target in sc.get("targets", []):
                    if port_of(target) not in http_ports:
                        fail("prometheus.yml", f"job {j.get('job_name')} scrapes {target}, not "
                                               f"kilnd's --http port {sorted(http_ports)}")
    if not jsons:
        fail(args.deploy, "no Grafana dashboard JSON")

    for f in failures:
        print("FAIL", f)
    print(f"deploy_manifests_test: {len(units)} units, {sum(map(len, yaml_docs.values()))} YAML "
          f"documents, {len(jsons)} JSON files, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
