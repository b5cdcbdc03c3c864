#!/usr/bin/env python3
"""Checks what docker-compose.yml and deploy/ say against each other and against Airlock,
since no Docker engine runs in CI to start them:

- the RabbitMQ definitions are what `airlock topology definitions` makes of the roles file
  (password hashes are salted at random, so each is checked against its password instead);
- every Airlock role in the compose file signs in as a user of the roles file, with its
  password, and is given every node of the cluster;
- Grafana's provisioning and dashboard hang together, and the dashboard's queries parse;
- the OpenTelemetry Collector's pipelines use only receivers, processors and exporters it
  defines;
- every `airlock_*` series in the alert rules and the dashboard is one Airlock exports;
- every file the compose file mounts from the repository exists.

Usage: deploy/check.py AIRLOCK_BINARY (PyYAML and promtool needed). Prints each problem
found and exits 1 if there was any.
"""

import base64
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, unquote

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
# The password of deploy/rabbitmq/definitions/admin.json's user, as docker-compose.yml gives it.
ADMIN_PASSWORD = "admin-compose"
# The compose services that run an Airlock role, and the role their broker user must have.
ROLE_OF_SERVICE = {"worker": "worker", "reviewer": "reviewer", "monitor": "step:monitor", "auditor": "auditor"}

problems = []


def problem(where, what):
    if isinstance(where, Path):
        where = where.relative_to(ROOT)
    problems.append(f"{where}: {what}")


def load_yaml(path):
    with open(path) as file:
        return yaml.safe_load(file)


# --- RabbitMQ definitions -----------------------------------------------------------------


def password_matches(password_hash, password):
    """RabbitMQ's rabbit_password_hashing_sha256: base64(salt + sha256(salt + password))."""
    if password is None:
        return password_hash == ""
    raw = base64.b64decode(password_hash)
    salt, digest = raw[:4], raw[4:]
    return hashlib.sha256(salt + password.encode()).digest() == digest


def without_hashes(definitions):
    copy = json.loads(json.dumps(definitions))
    for user in copy.get("users", []):
        user["password_hash"] = "<checked against the roles file>"
    return copy


def check_definitions(airlock):
    roles_file = DEPLOY / "rabbitmq/roles.yaml"
    committed_file = DEPLOY / "rabbitmq/definitions/fleet.json"
    generated = json.loads(
        subprocess.run(
            [airlock, "topology", "definitions", "--roles", str(roles_file)],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    committed = json.loads(committed_file.read_text())
    passwords = {user["name"]: user.get("password") for user in load_yaml(roles_file)["users"]}
    for user in committed.get("users", []):
        if not password_matches(user["password_hash"], passwords.get(user["name"])):
            problem(committed_file, f"the password hash of '{user['name']}' is not of its password in {roles_file.name}")
    if without_hashes(committed) != without_hashes(generated):
        problem(committed_file, f"differs from `airlock topology definitions --roles {roles_file.relative_to(ROOT)}`; "
                "generate it again")

    admin_file = DEPLOY / "rabbitmq/definitions/admin.json"
    admin = json.loads(admin_file.read_text())
    for user in admin["users"]:
        if not password_matches(user["password_hash"], ADMIN_PASSWORD):
            problem(admin_file, f"the password hash of '{user['name']}' is not of '{ADMIN_PASSWORD}'")
    definition_files = sorted(p.name for p in (DEPLOY / "rabbitmq/definitions").iterdir())
    if definition_files != ["admin.json", "fleet.json"]:
        # The broker imports every file of the directory.
        problem(DEPLOY / "rabbitmq/definitions", f"holds {definition_files}, expected admin.json and fleet.json")


# --- The compose file against the roles file ----------------------------------------------


def check_compose(compose):
    services = compose["services"]
    nodes = {name for name in services if re.fullmatch(r"rabbitmq\d+", name)}
    roles = load_yaml(DEPLOY / "rabbitmq/roles.yaml")
    users = {user["name"]: user for user in roles["users"]}
    for service, role in ROLE_OF_SERVICE.items():
        where = f"docker-compose.yml: {service}"
        spec = services.get(service)
        if spec is None:
            problem(where, "missing")
            continue
        urls = spec.get("environment", {}).get("AIRLOCK_AMQP_URL", "").split(",")
        hosts = set()
        for url in urls:
            if not url:
                problem(where, "AIRLOCK_AMQP_URL has an empty entry")
                continue
            parts = urlsplit(url)
            hosts.add(parts.hostname)
            user = users.get(unquote(parts.username or ""))
            if user is None:
                problem(where, f"{url}: no such user in deploy/rabbitmq/roles.yaml")
                continue
            if user["role"] != role:
                problem(where, f"user '{user['name']}' has the role {user['role']}, not {role}")
            if unquote(parts.password or "") != user.get("password"):
                problem(where, f"user '{user['name']}': the password is not the roles file's")
            if unquote(parts.path.lstrip("/")) != roles.get("vhost", "/"):
                problem(where, f"{url}: not the roles file's vhost")
        if hosts != nodes:
            problem(where, f"AIRLOCK_AMQP_URL names {sorted(map(str, hosts))}, not every node {sorted(nodes)}")
        if spec.get("environment", {}).get("AIRLOCK_PREFIX") != roles.get("prefix", "airlock"):
            problem(where, "AIRLOCK_PREFIX is not the roles file's prefix")
    reviewer_ids = [arg.split("=", 1)[1] for arg in services["reviewer"]["command"] if arg.startswith("--id=")]
    instances = [user.get("instance") for user in roles["users"] if user["role"] == "reviewer"]
    if reviewer_ids != instances:
        problem("docker-compose.yml: reviewer", f"--id {reviewer_ids} is not the roles file's instance {instances}")

    for name, spec in services.items():
        for volume in spec.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith("."):
                if not (ROOT / source).exists():
                    problem(f"docker-compose.yml: {name}", f"mounts {source}, which does not exist")


# --- Metric names -------------------------------------------------------------------------


def airlock_series():
    """The series Airlock exports, from the registrations in crates/telemetry/src/metrics.rs."""
    source = (ROOT / "crates/telemetry/src/metrics.rs").read_text()
    field_types = dict(re.findall(r"pub (\w+): (?:Family<\w+, )?(Counter|Gauge|Histogram)", source))
    series = set()
    for name, field in re.findall(r'registry\.register\(\s*"(\w+)",\s*"[^"]*",\s*(\w+)\.clone\(\)', source):
        full = f"airlock_{name}"
        kind = field_types.get(field)
        if kind == "Counter":
            series.add(full + "_total")
        elif kind == "Gauge":
            series.add(full)
        elif kind == "Histogram":
            series.update(full + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            problem("crates/telemetry/src/metrics.rs", f"cannot tell the type of '{name}'")
    if not series:
        problem("crates/telemetry/src/metrics.rs", "no registered metric found")
    return series


def check_series(where, expr, exported):
    for name in re.findall(r"\b(airlock_\w+)", expr):
        if name not in exported:
            problem(where, f"{name} is not a series Airlock exports")


# --- Grafana ------------------------------------------------------------------------------


def check_grafana(compose, exported):
    grafana = compose["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"] if volume.startswith("."))
    datasources = load_yaml(DEPLOY / "grafana/provisioning/datasources/datasources.yaml")
    uids = [source["uid"] for source in datasources["datasources"]]
    if datasources.get("apiVersion") != 1 or len(set(uids)) != len(uids):
        problem("deploy/grafana datasources", "needs apiVersion 1 and distinct uids")
    for source in datasources["datasources"]:
        missing = {"name", "type", "uid", "url"} - set(source)
        if missing:
            problem("deploy/grafana datasources", f"{source.get('name')}: no {sorted(missing)}")
        host = urlsplit(source.get("url", "")).hostname
        if host not in compose["services"]:
            problem("deploy/grafana datasources", f"{source.get('name')}: {host} is no compose service")

    providers = load_yaml(DEPLOY / "grafana/provisioning/dashboards/airlock.yaml")
    for provider in providers["providers"]:
        path = provider["options"]["path"]
        if mounts.get("./deploy/grafana/dashboards") != path:
            problem("deploy/grafana dashboards provider", f"reads {path}, where the compose file mounts no dashboards")
    home = grafana["environment"].get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH", "")
    if not (DEPLOY / "grafana/dashboards" / Path(home).name).exists():
        problem("docker-compose.yml: grafana", f"the home dashboard {home} is not in deploy/grafana/dashboards")

    expressions = []
    for path in sorted((DEPLOY / "grafana/dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text())
        where = path.relative_to(ROOT)
        for key in ("uid", "title", "schemaVersion", "panels"):
            if key not in dashboard:
                problem(where, f"no '{key}'")
        ids = [panel.get("id") for panel in dashboard.get("panels", [])]
        if None in ids or len(set(ids)) != len(ids):
            problem(where, "panel ids must be present and distinct")
        for panel in dashboard.get("panels", []):
            title = f"{where}: panel '{panel.get('title')}'"
            grid = panel.get("gridPos", {})
            if not {"x", "y", "w", "h"} <= set(grid) or grid["x"] + grid["w"] > 24:
                problem(title, "needs a gridPos within 24 columns")
            if panel.get("type") == "row":
                continue
            if panel.get("datasource", {}).get("uid") not in uids:
                problem(title, "its data source is not a provisioned one")
            targets = panel.get("targets", [])
            refs = [target.get("refId") for target in targets]
            if not targets or len(set(refs)) != len(refs):
                problem(title, "needs targets with distinct refIds")
            for target in targets:
                if target.get("datasource", {}).get("uid", uids[0]) not in uids:
                    problem(title, "a query's data source is not a provisioned one")
                check_series(title, target.get("expr", ""), exported)
                expressions.append((title, target.get("expr", "")))
    check_promql(expressions)


def check_promql(expressions):
    """Parses the dashboard's queries with promtool, as the expressions of recording rules."""
    rules = [
        # Grafana's own variables, as Prometheus would get them.
        {"record": f"dashboard:query{i}", "expr": expr.replace("$__rate_interval", "1m").replace("$__interval", "1m")}
        for i, (_, expr) in enumerate(expressions)
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as file:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, file)
        file.flush()
        checked = subprocess.run(["promtool", "check", "rules", file.name], capture_output=True, text=True)
    if checked.returncode != 0:
        problem("deploy/grafana/dashboards", "a query does not parse:\n" + checked.stdout + checked.stderr)


# --- Prometheus rules and the collector ---------------------------------------------------


def check_rules(exported):
    for path in sorted((DEPLOY / "prometheus/rules").glob("*.yml")):
        for group in load_yaml(path)["groups"]:
            for rule in group["rules"]:
                check_series(f"{path.relative_to(ROOT)}: {rule.get('alert') or rule.get('record')}", rule["expr"], exported)


def check_collector(compose):
    path = DEPLOY / "otel/collector.yaml"
    config = load_yaml(path)
    for name, pipeline in config["service"]["pipelines"].items():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                if component not in (config.get(section) or {}):
                    problem(path.relative_to(ROOT), f"pipeline {name} uses the undefined {section[:-1]} {component}")
        if not pipeline.get("receivers") or not pipeline.get("exporters"):
            problem(path.relative_to(ROOT), f"pipeline {name} needs a receiver and an exporter")
    for name, exporter in (config.get("exporters") or {}).items():
        host = (exporter or {}).get("endpoint", "").split("://")[-1].split(":")[0]
        if host and host not in compose["services"]:
            problem(path.relative_to(ROOT), f"exporter {name} sends to {host}, which is no compose service")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    compose = load_yaml(ROOT / "docker-compose.yml")
    exported = airlock_series()
    check_definitions(sys.argv[1])
    check_compose(compose)
    check_rules(exported)
    check_grafana(compose, exported)
    check_collector(compose)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        sys.exit(1)
    print("deploy/: definitions, compose users and nodes, Grafana, the collector and metric names agree")


if __name__ == "__main__":
    main()
