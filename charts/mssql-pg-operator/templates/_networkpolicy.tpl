{{/* Egress rules both NetworkPolicies share: the cluster's DNS, the API server, the OTLP collector. */}}

{{/* DNS: only to the cluster's DNS servers (networkPolicy.dns), UDP and TCP. */}}
{{- define "mssql-pg-operator.egressDns" -}}
{{- $dns := .Values.networkPolicy.dns -}}
# DNS: the cluster's DNS servers only (networkPolicy.dns)
- to:
    {{- toYaml $dns.to | nindent 4 }}
  ports:
  {{- range $dns.ports }}
  - {port: {{ . }}, protocol: UDP}
  - {port: {{ . }}, protocol: TCP}
  {{- end }}
{{- end }}

{{/* CIDRs of the API server: networkPolicy.apiServerCIDRs, else the addresses of the kubernetes Service's
EndpointSlice at install time. Rendering fails when neither gives any: an empty `to` would allow every
destination on the API ports. */}}
{{- define "mssql-pg-operator.apiServerCIDRs" -}}
{{- $cidrs := .Values.networkPolicy.apiServerCIDRs }}
{{- if not $cidrs }}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" }}
{{- range ($slice.endpoints | default list) }}
{{- range .addresses }}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $cidrs }}
{{- fail "networkPolicy: set networkPolicy.apiServerCIDRs to the Kubernetes API server's addresses (kubectl get endpointslice kubernetes -n default); the chart looks them up only when installed into a cluster, not in helm template" }}
{{- end }}
{{- toJson $cidrs }}
{{- end }}

{{- define "mssql-pg-operator.egressApiServer" -}}
# The Kubernetes API server only
- to:
  {{- range include "mssql-pg-operator.apiServerCIDRs" . | fromJsonArray }}
  - ipBlock: {cidr: {{ . }}}
  {{- end }}
  ports:
  {{- range .Values.networkPolicy.apiServerPorts }}
  - {port: {{ . }}, protocol: TCP}
  {{- end }}
{{- end }}

{{/* The OTLP collector's port (from the URL), to networkPolicy.otlpTo or else any destination. */}}
{{- define "mssql-pg-operator.egressOtlp" -}}
{{- with .Values.otlpEndpoint }}
{{- $hostport := (urlParse .).host -}}
# OTLP collector: its port (from otlpEndpoint){{ if not $.Values.networkPolicy.otlpTo }}, any destination (networkPolicy.otlpTo unset){{ end }}
- ports:
  - {port: {{ ternary (last (splitList ":" $hostport)) "4317" (contains ":" $hostport) }}, protocol: TCP}
  {{- with $.Values.networkPolicy.otlpTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}
