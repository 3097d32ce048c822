{{/* Rules that let the operator start pods in a namespace (operator-jobs-rbac.yaml; rbac.yaml with
watchNamespace). */}}
{{- define "mssql-pg-operator.jobsRules" }}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, delete, deletecollection]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [create, delete]
{{- end }}

{{/* Namespaces the operator runs Migrations in, for MSSQLPG_MIGRATION_NAMESPACES: the worker namespaces, unless
Jobs are allowed everywhere or one namespace is watched (then "": no list). */}}
{{- define "mssql-pg-operator.migrationNamespaces" -}}
{{- if not (or .Values.rbac.jobsInAllNamespaces .Values.watchNamespace) }}
{{- include "mssql-pg-operator.workerNamespaces" . | fromJsonArray | join "," }}
{{- end }}
{{- end }}
