{{/* Name of the chart, overridable. */}}
{{- define "mssql-pg-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name when it already contains the chart name, else release-chart. */}}
{{- define "mssql-pg-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mssql-pg-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mssql-pg-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mssql-pg-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mssql-pg-operator.labels" -}}
helm.sh/chart: {{ include "mssql-pg-operator.chart" . }}
{{ include "mssql-pg-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mssql-pg-operator
{{- end }}

{{- define "mssql-pg-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mssql-pg-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image reference: repository@digest when a digest is given (the tag is then only informative and
left out, so the reference cannot drift), else repository:tag. */}}
{{- define "mssql-pg-operator.imageRef" -}}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository .tag }}
{{- end }}
{{- end }}

{{- define "mssql-pg-operator.image" -}}
{{- include "mssql-pg-operator.imageRef" (dict "repository" .Values.image.repository "tag" (default .Chart.AppVersion .Values.image.tag) "digest" .Values.image.digest) }}
{{- end }}

{{/* The workers run the operator's image unless worker.image says otherwise; a worker repository of its own
does not inherit the operator's digest. */}}
{{- define "mssql-pg-operator.workerImage" -}}
{{- $repo := default .Values.image.repository .Values.worker.image.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.worker.image.tag }}
{{- $digest := .Values.worker.image.digest }}
{{- if and (not $digest) (not .Values.worker.image.repository) (not .Values.worker.image.tag) }}
{{- $digest = .Values.image.digest }}
{{- end }}
{{- include "mssql-pg-operator.imageRef" (dict "repository" $repo "tag" $tag "digest" $digest) }}
{{- end }}

{{/* Leader election is needed as soon as more than one replica could reconcile at once. */}}
{{- define "mssql-pg-operator.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicaCount) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/* Namespaces that get the worker service account, Role and RoleBinding (release namespace first). */}}
{{- define "mssql-pg-operator.workerNamespaces" -}}
{{- $list := list .Release.Namespace }}
{{- range .Values.worker.serviceAccount.namespaces }}
{{- if not (has . $list) }}{{ $list = append $list . }}{{ end }}
{{- end }}
{{- toJson $list }}
{{- end }}
