{{/*
The names are fixed, as in deploy/: the admission policy, the alerts (job nodewright-worker) and
the README name them, and one worker serves one cluster.
*/}}
{{- define "nodewright.name" -}}nodewright-worker{{- end -}}

{{/* The labels every object carries: deploy/'s two, and Helm's. */}}
{{- define "nodewright.labels" -}}
app.kubernetes.io/name: nodewright
app.kubernetes.io/component: worker
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The pods' selector, as deploy/deployment.yaml's (a Deployment's selector cannot change). */}}
{{- define "nodewright.selectorLabels" -}}
app.kubernetes.io/name: nodewright
app.kubernetes.io/component: worker
{{- end -}}

{{- define "nodewright.identityNamespace" -}}
{{- default .Release.Namespace .Values.identityNamespace -}}
{{- end -}}

{{- define "nodewright.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if eq $tag "latest" -}}{{- fail "image.tag latest: name the release's version (and its digest)" -}}{{- end -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount's user name, which the admission policy matches. */}}
{{- define "nodewright.username" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "nodewright.name" . }}
{{- end -}}
