#!/usr/bin/env python3
"""Assertions on `helm template` output of charts/mssql-pg-operator (read from files given on the command line).

  check_render.py default RENDERED.yaml       the default values
  check_render.py full RENDERED.yaml          tests/helm/values-full.yaml (2 replicas, monitors, NetworkPolicy, ...)
  check_render.py namespaced RENDERED.yaml    watchNamespace set: a Role instead of the ClusterRole; crds.install=false
  check_render.py clusterwide RENDERED.yaml   rbac.jobsInAllNamespaces: Jobs everywhere, no namespace list

Every mode also checks the aggregated user ClusterRoles, the `helm test` pod and the tenancy settings; full also the
NetworkPolicies and the ValidatingAdmissionPolicy.

The operator's RBAC must be exactly operator/tests/e2e/operator-rbac.yaml (the documented least privilege, which
the operator e2e proves sufficient): its first ClusterRole cluster-wide, its -jobs ClusterRole (creating Jobs,
reading pods) bound only in the worker namespaces unless rbac.jobsInAllNamespaces; the worker's exactly
deploy/examples/worker-rbac.yaml.

The NetworkPolicies are checked here by content only: the loopback control plane's node agent runs pods as local
processes, so no CNI enforces them there.
"""
import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
problems = []
DIGEST_IMAGE = "registry.example/mssqlpg/operator@sha256:" + "ab" * 32


def check(cond, what):
    if not cond:
        problems.append(what)


def load(path):
    return [d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d]


def find(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs, kind, name=None):
    found = find(docs, kind, name)
    check(len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0] if found else {}


def norm(rules):
    return sorted(
        (tuple(sorted(r.get("apiGroups", []))), tuple(sorted(r["resources"])), tuple(sorted(r["verbs"])))
        for r in rules
    )


def reference_rules():
    """(cluster-wide rules, lease rules, rules that start pods) of operator-rbac.yaml."""
    docs = load(ROOT / "operator/tests/e2e/operator-rbac.yaml")
    rules = one(docs, "ClusterRole", "mssql-pg-operator-e2e")["rules"]
    jobs = one(docs, "ClusterRole", "mssql-pg-operator-e2e-jobs")["rules"]
    # Leases are only needed with leader election; the chart grants them in a namespaced Role then.
    lease = [r for r in rules if r["resources"] == ["leases"]]
    return [r for r in rules if r["resources"] != ["leases"]], lease, jobs


def worker_reference_rules():
    return one(load(ROOT / "deploy/examples/worker-rbac.yaml"), "Role")["rules"]


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def check_deployment(docs, replicas, leader):
    dep = one(docs, "Deployment", "mssql-pg-operator")
    spec = dep.get("spec", {})
    check(spec.get("replicas") == replicas, f"replicas {spec.get('replicas')} != {replicas}")
    pod = spec["template"]["spec"]
    check(pod["serviceAccountName"] == "mssql-pg-operator", "operator service account")
    psc = pod["securityContext"]
    check(psc.get("runAsNonRoot") is True, "pod runAsNonRoot")
    check(psc.get("seccompProfile") == {"type": "RuntimeDefault"}, "pod seccomp RuntimeDefault")
    (c,) = pod["containers"]
    sc = c["securityContext"]
    check(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation false")
    check(sc.get("capabilities") == {"drop": ["ALL"]}, "capabilities drop ALL")
    check(sc.get("runAsNonRoot") is True, "container runAsNonRoot")
    check(sc.get("seccompProfile") == {"type": "RuntimeDefault"}, "container seccomp")
    check(c["livenessProbe"]["httpGet"]["path"] == "/livez", "liveness probe on /livez")
    check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe on /readyz")
    check("limits" in c.get("resources", {}) and "requests" in c["resources"], "operator resources")
    env = env_of(c)
    check(env.get("LEADER_ELECTION") == ("true" if leader else "false"), f"LEADER_ELECTION {env.get('LEADER_ELECTION')}")
    check(env.get("POD_NAMESPACE") == {"fieldRef": {"fieldPath": "metadata.namespace"}}, "POD_NAMESPACE fieldRef")
    check(env.get("POD_NAME") == {"fieldRef": {"fieldPath": "metadata.name"}}, "POD_NAME fieldRef")
    check(env.get("MSSQLPG_WORKER_SERVICE_ACCOUNT") == "mssql-pg-worker", "worker service account env")
    check(spec["strategy"]["type"] == ("RollingUpdate" if leader else "Recreate"), "strategy vs leader election")
    return dep, c, env


OPERATOR_SA = [{"kind": "ServiceAccount", "name": "mssql-pg-operator", "namespace": "mssql-pg-operator"}]


def check_operator_rbac(docs, namespaced, leader, job_namespaces=(), cluster_wide_jobs=False):
    """The operator's rules; `job_namespaces`: where it may start pods (RoleBindings of its -jobs ClusterRole)."""
    rules, lease, jobs = reference_rules()
    kind = "Role" if namespaced else "ClusterRole"
    role = one(docs, kind, "mssql-pg-operator")
    want = rules + jobs if namespaced else rules
    check(norm(role.get("rules", [])) == norm(want), f"operator {kind} rules differ from operator-rbac.yaml")
    binding = one(docs, kind + "Binding", "mssql-pg-operator")
    check(binding.get("subjects") == OPERATOR_SA, "operator binding subject")
    jobs_roles = find(docs, "ClusterRole", "mssql-pg-operator-jobs")
    jobs_crb = find(docs, "ClusterRoleBinding", "mssql-pg-operator-jobs")
    jobs_rbs = find(docs, "RoleBinding", "mssql-pg-operator-jobs")
    if namespaced:
        check(not (jobs_roles or jobs_crb or jobs_rbs), "watchNamespace: Jobs rights outside the one Role")
    else:
        check(len(jobs_roles) == 1 and norm(jobs_roles[0]["rules"]) == norm(jobs),
              "the -jobs ClusterRole differs from operator-rbac.yaml's mssql-pg-operator-e2e-jobs")
        check(len(jobs_crb) == (1 if cluster_wide_jobs else 0),
              f"-jobs ClusterRoleBinding present={bool(jobs_crb)}, rbac.jobsInAllNamespaces={cluster_wide_jobs}")
        check(sorted(b["metadata"]["namespace"] for b in jobs_rbs) == sorted(job_namespaces),
              f"-jobs RoleBindings in {[b['metadata']['namespace'] for b in jobs_rbs]}, expected {job_namespaces}")
        for b in jobs_crb + jobs_rbs:
            check(b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": "mssql-pg-operator-jobs"} and b["subjects"] == OPERATOR_SA,
                  f"{b['kind']} mssql-pg-operator-jobs binds {b['roleRef']} to {b['subjects']}")
    # Only the -jobs ClusterRole (or the watchNamespace Role) lets anything create Jobs.
    for d in find(docs, "ClusterRole") + find(docs, "Role"):
        if d["metadata"]["name"] in ("mssql-pg-operator-jobs",) or (namespaced and d is role):
            continue
        for r in d.get("rules", []):
            check(not ("jobs" in r["resources"] and "create" in r["verbs"]),
                  f"{d['kind']} {d['metadata']['name']} creates Jobs")
    check(not find(docs, "ClusterRole" if namespaced else "Role", "mssql-pg-operator"), "both Role and ClusterRole")
    le = find(docs, "Role", "mssql-pg-operator-leader-election")
    check(bool(le) == leader, f"leader election Role present={bool(le)}, expected {leader}")
    if le:
        check(norm(le[0]["rules"]) == norm(lease), "leader election Role rules differ from operator-rbac.yaml")
        check(le[0]["metadata"]["namespace"] == "mssql-pg-operator", "lease Role in the release namespace")
    for d in docs:
        for r in d.get("rules", []) if d["kind"] in ("Role", "ClusterRole") else []:
            check("secrets" not in r["resources"], f"{d['kind']} {d['metadata']['name']} grants Secrets")
            check("*" not in r["verbs"] and "*" not in r["resources"], f"{d['kind']} {d['metadata']['name']} wildcard")


def check_worker_rbac(docs, namespaces):
    ref = norm(worker_reference_rules())
    sas = find(docs, "ServiceAccount", "mssql-pg-worker")
    check(sorted(s["metadata"]["namespace"] for s in sas) == sorted(namespaces), f"worker SAs in {namespaces}")
    for ns in namespaces:
        roles = [r for r in find(docs, "Role", "mssql-pg-worker") if r["metadata"]["namespace"] == ns]
        check(len(roles) == 1 and norm(roles[0]["rules"]) == ref, f"worker Role in {ns} differs from worker-rbac.yaml")
        rbs = [r for r in find(docs, "RoleBinding", "mssql-pg-worker") if r["metadata"]["namespace"] == ns]
        check(len(rbs) == 1 and rbs[0]["subjects"] == [{"kind": "ServiceAccount", "name": "mssql-pg-worker",
                                                         "namespace": ns}], f"worker RoleBinding in {ns}")


def check_user_roles(docs):
    """Migration rights folded into Kubernetes' view/edit/admin: view reads both kinds, edit/admin also write
    Migrations; nobody gets to write MigrationTasks (the operator's and workers' bookkeeping)."""
    agg = "rbac.authorization.k8s.io/aggregate-to-"
    view = one(docs, "ClusterRole", "mssql-pg-operator-view")
    edit = one(docs, "ClusterRole", "mssql-pg-operator-edit")
    labels = lambda d: {k[len(agg):] for k, v in d.get("metadata", {}).get("labels", {}).items()
                        if k.startswith(agg) and v == "true"}
    check(labels(view) == {"view", "edit", "admin"}, f"view ClusterRole aggregates to {labels(view)}")
    check(labels(edit) == {"edit", "admin"}, f"edit ClusterRole aggregates to {labels(edit)}")
    check(norm(view.get("rules", [])) == norm([{"apiGroups": ["mssqlpg.dev"], "verbs": ["get", "list", "watch"],
                                                "resources": ["migrations", "migrations/status", "migrationtasks",
                                                              "migrationtasks/status"]}]), "view ClusterRole rules")
    check(norm(edit.get("rules", [])) == norm([{"apiGroups": ["mssqlpg.dev"], "resources": ["migrations"],
                                                "verbs": ["create", "update", "patch", "delete",
                                                          "deletecollection"]}]), "edit ClusterRole rules")


def check_crds(docs):
    """The CRDs, rendered from templates/crds/ (so helm upgrade updates them): the generated objects of
    crds/generated/ plus helm.sh/resource-policy: keep, which stops helm uninstall from deleting every Migration."""
    rendered = {d["metadata"]["name"]: d for d in find(docs, "CustomResourceDefinition")}
    generated = {}
    for path in sorted((ROOT / "crds/generated").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        generated[crd["metadata"]["name"]] = crd
    check(sorted(rendered) == sorted(generated), f"CRDs rendered {sorted(rendered)}, generated {sorted(generated)}")
    for name, crd in rendered.items():
        meta = dict(crd.get("metadata", {}))
        annotations = dict(meta.pop("annotations", {}) or {})
        check(annotations.pop("helm.sh/resource-policy", None) == "keep", f"CRD {name} without resource-policy keep")
        check(not annotations, f"CRD {name} has other annotations {annotations}")
        check({**crd, "metadata": meta} == generated.get(name), f"CRD {name} differs from crds/generated/{name}.yaml")


def check_pdb(docs, max_unavailable):
    """With more than one replica a PodDisruptionBudget over exactly the operator's pods; with one, none (it could
    only block node drains)."""
    pdbs = find(docs, "PodDisruptionBudget")
    if max_unavailable is None:
        check(not pdbs, "a PodDisruptionBudget with one replica")
        return
    pdb = one(docs, "PodDisruptionBudget", "mssql-pg-operator")
    spec = pdb.get("spec", {})
    check(spec.get("maxUnavailable") == max_unavailable, f"PDB maxUnavailable {spec.get('maxUnavailable')}")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    selector = spec.get("selector", {}).get("matchLabels", {})
    check(selector and all(pod_labels.get(k) == v for k, v in selector.items()),
          f"PDB selector {selector} does not select the operator pods {pod_labels}")
    deployment_selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    check(all(selector.get(k) == v for k, v in deployment_selector.items()),
          f"PDB selector {selector} selects more than the Deployment's {deployment_selector}")


def check_selftest(docs, image, url):
    """The `helm test` hook: the operator image's own selftest against the metrics Service, deleted once passed."""
    pod = one(docs, "Pod", "mssql-pg-operator-selftest")
    ann = pod.get("metadata", {}).get("annotations", {})
    check(ann.get("helm.sh/hook") == "test", "selftest pod is a helm test hook")
    check("hook-succeeded" in ann.get("helm.sh/hook-delete-policy", ""), "selftest pod deleted when it passed")
    spec = pod.get("spec", {})
    check(spec.get("restartPolicy") == "Never", "selftest restartPolicy Never")
    (c,) = spec.get("containers", [{}])
    check(c.get("image") == image, f"selftest image {c.get('image')} != {image}")
    check(c.get("command") == ["mssql-pg-operator", "selftest", "--readyz-url", url],
          f"selftest command {c.get('command')}")
    check(c.get("securityContext", {}).get("readOnlyRootFilesystem") is True, "selftest container hardened")
    check(spec.get("securityContext", {}).get("runAsNonRoot") is True, "selftest pod non-root")


KUBE_DNS = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
             "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
OTLP_PEERS = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}]


def egress_rules(spec):
    """Each egress rule as (peers, [(protocol, port)]): every rule of both policies names its peers."""
    out = []
    for r in spec["egress"]:
        check("to" in r and r["to"], f"egress rule without peers (any destination): {r}")
        out.append((r.get("to", []), sorted((p["protocol"], p["port"]) for p in r["ports"])))
    return out


def check_shared_egress(rules, what):
    """DNS only to kube-dns, the API server only at values-full.yaml's CIDRs, OTLP only to its namespace."""
    tcp = lambda *ports: sorted(("TCP", p) for p in ports)
    check(rules[0] == (KUBE_DNS, sorted([("TCP", 53), ("UDP", 53)])), f"{what} DNS egress {rules[0]}")
    api = [{"ipBlock": {"cidr": c}} for c in ("10.0.0.1/32", "192.168.10.0/24")]
    check(rules[1] == (api, tcp(443, 6443)), f"{what} API server egress {rules[1]}")
    check(rules[-1] == (OTLP_PEERS, tcp(4317)), f"{what} OTLP egress {rules[-1]}")


def check_network_policies(docs, namespaces):
    """The operator: ingress to its metrics port, egress to DNS, the API server and OTLP. Worker pods: ingress only
    to their metrics port, egress besides only to the CIDRs and ports of values-full.yaml's allowedEndpoints."""
    np_ = one(docs, "NetworkPolicy", "mssql-pg-operator")
    check(np_.get("spec", {}).get("policyTypes") == ["Ingress", "Egress"], "NetworkPolicy types")
    rules = egress_rules(np_["spec"])
    check(len(rules) == 3, f"operator egress: DNS, API server, OTLP; found {rules}")
    check_shared_egress(rules, "operator")
    nps = [d for d in find(docs, "NetworkPolicy", "mssql-pg-operator-workers")]
    check(sorted(n["metadata"]["namespace"] for n in nps) == sorted(namespaces), f"worker NetworkPolicies in {namespaces}")
    for np_ in nps:
        spec = np_["spec"]
        check(spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "mssql-pg-worker"}},
              "worker NetworkPolicy selects worker pods")
        check(spec["policyTypes"] == ["Ingress", "Egress"], "worker NetworkPolicy types")
        check([p["port"] for r in spec["ingress"] for p in r["ports"]] == [9090], "worker ingress: metrics port only")
        rules = egress_rules(spec)
        check(len(rules) == 5, f"worker egress: DNS, API server, two databases, OTLP; found {rules}")
        check_shared_egress(rules, "worker")
        check(rules[2:4] == [([{"ipBlock": {"cidr": "10.20.0.0/16"}}], [("TCP", 1433)]),
                             ([{"ipBlock": {"cidr": "10.30.0.5/32"}}, {"ipBlock": {"cidr": "10.30.0.6/32"}}],
                              [("TCP", 5432)])], f"worker database egress {rules[2:4]}")


def check_admission_policy(docs, image, images, accounts, command):
    """Jobs and capture Deployments of the operator's service account pinned to the worker image(s), service
    account(s) and command."""
    vap = one(docs, "ValidatingAdmissionPolicy", "mssql-pg-operator-worker-jobs")
    spec = vap.get("spec", {})
    check(spec.get("failurePolicy") == "Fail", "admission policy fails closed")
    check(spec.get("matchConstraints", {}).get("resourceRules") == [
        {"apiGroups": ["batch"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
        {"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}],
        "admission policy matches Job and Deployment (online capture) writes")
    check([c["expression"] for c in spec.get("matchConditions", [])] == [
        "request.userInfo.username == 'system:serviceaccount:mssql-pg-operator:mssql-pg-operator'"],
        "admission policy applies to the operator's service account only")
    var = {v["name"]: v["expression"] for v in spec.get("variables", [])}
    check(json.loads(var.get("images", "null")) == [image] + images, f"pinned images {var.get('images')}")
    check(json.loads(var.get("accounts", "null")) == accounts, f"pinned service accounts {var.get('accounts')}")
    check(json.loads(var.get("command", "null")) == command, f"pinned command {var.get('command')}")
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "mssql-pg-operator-worker-jobs")
    check(binding.get("spec") == {"policyName": "mssql-pg-operator-worker-jobs", "validationActions": ["Deny"]},
          f"admission policy binding {binding.get('spec')}")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    docs = load(path)
    kinds = sorted({d["kind"] for d in docs})
    if mode == "default":
        check_deployment(docs, 1, leader=False)
        check_operator_rbac(docs, namespaced=False, leader=False, job_namespaces=["mssql-pg-operator"])
        check_worker_rbac(docs, ["mssql-pg-operator"])
        # The plain manifests' users bind the operator's -jobs ClusterRole in each further namespace with the
        # example; it must bind what the chart binds.
        example = one(load(ROOT / "deploy/examples/worker-rbac.yaml"), "RoleBinding", "mssql-pg-operator-jobs")
        chart = one(docs, "RoleBinding", "mssql-pg-operator-jobs")
        check((example["roleRef"], example["subjects"]) == (chart["roleRef"], chart["subjects"]),
              "deploy/examples/worker-rbac.yaml binds the operator's -jobs role otherwise than the chart")
        for k in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "NetworkPolicy", "ConfigMap",
                  "ValidatingAdmissionPolicy"):
            check(k not in kinds, f"{k} rendered by default (kinds: {kinds})")
        check_crds(docs)
        check_pdb(docs, None)
        check_user_roles(docs)
        check_selftest(docs, "ghcr.io/mssql-pg-operator/mssql-pg-operator:0.1.0",
                       "http://mssql-pg-operator-metrics.mssql-pg-operator.svc:8080/readyz")
        env = env_of(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
        check(env.get("MSSQLPG_ALLOWED_WORKER_IMAGES") == "" and env.get("MSSQLPG_ALLOWED_WORKER_SERVICE_ACCOUNTS") == "",
              "no worker override allowed by default")
        check(env.get("MSSQLPG_WORKER_IMAGE") == "ghcr.io/mssql-pg-operator/mssql-pg-operator:0.1.0", "worker image")
        # Any host, on SQL Server's and PostgreSQL's ports only (the documented default; NOTES.txt warns).
        check(json.loads(env.get("MSSQLPG_ALLOWED_ENDPOINTS", "null")) == [{"hosts": ["*"], "ports": [1433, 5432]}],
              f"default endpoint allowlist {env.get('MSSQLPG_ALLOWED_ENDPOINTS')}")
        check(env.get("MSSQLPG_MIGRATION_NAMESPACES") == "mssql-pg-operator", "Migrations only in the worker namespaces")
        svc = one(docs, "Service", "mssql-pg-operator-metrics")
        check(svc.get("spec", {}).get("ports", [{}])[0].get("targetPort") == "metrics", "metrics Service port")
    elif mode == "full":
        dep, c, env = check_deployment(docs, 2, leader=True)
        worker_namespaces = ["mssql-pg-operator", "migrations", "team-a"]
        check_operator_rbac(docs, namespaced=False, leader=True, job_namespaces=worker_namespaces)
        check_worker_rbac(docs, worker_namespaces)
        check(env.get("MSSQLPG_MIGRATION_NAMESPACES") == ",".join(worker_namespaces), "MSSQLPG_MIGRATION_NAMESPACES")
        check(json.loads(env.get("MSSQLPG_ALLOWED_ENDPOINTS", "null")) == [
            {"hosts": ["*.db.example.com"], "cidrs": ["10.20.0.0/16"], "ports": [1433]},
            {"hosts": ["pg.example.com"], "cidrs": ["10.30.0.5/32", "10.30.0.6/32"], "ports": [5432]}],
            f"endpoint allowlist {env.get('MSSQLPG_ALLOWED_ENDPOINTS')}")
        check_admission_policy(docs, "registry.example/mssqlpg/worker:9.9.9",
                               ["registry.example/mssqlpg/*", "registry.example/other/w:1"],
                               ["mssql-pg-worker", "etl-reader"], ["mssql-pg-worker"])
        check(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") == "http://otel-collector.observability:4317", "OTLP env")
        check(env.get("RUST_LOG") == "debug", "log level")
        # The operator's digest pins its own image; the worker's own repository keeps the tag.
        check(env.get("MSSQLPG_WORKER_IMAGE") == "registry.example/mssqlpg/worker:9.9.9", "worker image")
        check(env.get("MSSQLPG_ALLOWED_WORKER_IMAGES") == "registry.example/mssqlpg/*,registry.example/other/w:1",
              f"allowed worker images {env.get('MSSQLPG_ALLOWED_WORKER_IMAGES')}")
        check(env.get("MSSQLPG_ALLOWED_WORKER_SERVICE_ACCOUNTS") == "etl-reader", "allowed worker service accounts")
        check(env.get("LOG_JSON") == "true", "JSON logs (handed to workers as LOG_FORMAT by the operator)")
        check_user_roles(docs)
        check_selftest(docs, DIGEST_IMAGE, "http://127.0.0.1:18080/readyz")
        check_network_policies(docs, worker_namespaces)
        check(json.loads(env.get("MSSQLPG_WORKER_RESOURCES", "{}")) == {"requests": {"cpu": "1", "memory": "512Mi"},
                                                                       "limits": {"memory": "2Gi"}}, "worker resources")
        check(c["image"] == DIGEST_IMAGE, f"operator image pinned by digest: {c['image']}")
        pod = dep["spec"]["template"]["spec"]
        check(pod.get("nodeSelector") == {"kubernetes.io/os": "linux"}, "nodeSelector")
        check(pod.get("tolerations", [{}])[0].get("key") == "dedicated", "tolerations")
        check("podAntiAffinity" in pod.get("affinity", {}), "affinity")
        sm = one(docs, "ServiceMonitor")
        check(sm.get("spec", {}).get("endpoints", [{}])[0].get("port") == "metrics", "ServiceMonitor port")
        # The operator's and the workers' own namespace and migration labels win over the target's (the operator
        # runs in its own namespace): the dashboard joins the two sides on them.
        check(sm.get("spec", {}).get("endpoints", [{}])[0].get("honorLabels") is True, "ServiceMonitor honorLabels")
        pm = one(docs, "PodMonitor")
        check(pm.get("spec", {}).get("selector") == {"matchLabels": {"app.kubernetes.io/name": "mssql-pg-worker"}},
              "PodMonitor selects worker pods")
        # The worker pods' named port (operator/src/jobs.rs); targetPort is deprecated in PodMonitors.
        endpoint = pm.get("spec", {}).get("podMetricsEndpoints", [{}])[0]
        check(endpoint.get("port") == "metrics" and "targetPort" not in endpoint, f"PodMonitor endpoint {endpoint}")
        check(endpoint.get("honorLabels") is True, "PodMonitor honorLabels")
        pr = one(docs, "PrometheusRule")
        alerts = {r["alert"] for g in pr["spec"]["groups"] for r in g["rules"]}
        runbooks = {r["annotations"].get("runbook_url") for g in pr["spec"]["groups"] for r in g["rules"]}
        check(runbooks == {f"https://wiki.example/mssqlpg/runbooks#{a.lower()}" for a in alerts},
              f"prometheusRule.runbookBaseUrl: {runbooks}")
        check({"MssqlPgMigrationFailed", "MssqlPgMigrationStalled", "MssqlPgOperatorDown",
               "MssqlPgReconcileErrors"} <= alerts, f"alerts {alerts}")
        stalled = [r for g in pr["spec"]["groups"] for r in g["rules"] if r["alert"] == "MssqlPgMigrationStalled"]
        check(stalled and stalled[0]["for"] == "5m" and stalled[0]["expr"].count("[20m]") == 2, "stalledMinutes applied")
        check_crds(docs)
        check_pdb(docs, 1)
        cm = one(docs, "ConfigMap", "mssql-pg-operator-dashboard")
        check(cm.get("metadata", {}).get("labels", {}).get("grafana_dashboard") == "1", "dashboard sidecar label")
        check(cm.get("metadata", {}).get("namespace") == "monitoring", "dashboard namespace")
        shipped = json.loads((ROOT / "deploy/dashboards/mssql-pg-operator.json").read_text())
        check(json.loads(cm.get("data", {}).get("mssql-pg-operator.json", "{}")) == shipped,
              "dashboard ConfigMap differs from deploy/dashboards/mssql-pg-operator.json")
    elif mode == "namespaced":
        check_deployment(docs, 1, leader=False)
        check_operator_rbac(docs, namespaced=True, leader=False)
        check_user_roles(docs)
        role = one(docs, "Role", "mssql-pg-operator")
        check(role.get("metadata", {}).get("namespace") == "migrations", "operator Role in the watched namespace")
        env = env_of(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
        check(env.get("WATCH_NAMESPACE") == "migrations", "WATCH_NAMESPACE")
        check(env.get("MSSQLPG_MIGRATION_NAMESPACES") == "", "watchNamespace: no namespace list")
        check("CustomResourceDefinition" not in kinds, "CRDs rendered with crds.install=false")
    elif mode == "clusterwide":
        check_deployment(docs, 1, leader=False)
        check_operator_rbac(docs, namespaced=False, leader=False, cluster_wide_jobs=True)
        env = env_of(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
        check(env.get("MSSQLPG_MIGRATION_NAMESPACES") == "", "rbac.jobsInAllNamespaces: Migrations in every namespace")
    else:
        problems.append(f"unknown mode {mode}")
    for p in problems:
        print(f"check_render {mode}: {p}", file=sys.stderr)
    if not problems:
        print(f"check_render {mode}: ok ({len(docs)} objects: {', '.join(kinds)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
