{{/* The release's name prefix of every object. */}}
{{- define "shoal.fullname" -}}
{{- if contains "shoal" .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-shoal" .Release.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "shoal.labels" -}}
app.kubernetes.io/name: shoal
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector of one component's pods: call with (dict "root" $ "name" "crawler"). */}}
{{- define "shoal.selector" -}}
app.kubernetes.io/name: shoal
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* A setting name that holds a secret: refused in the ConfigMap. */}}
{{- define "shoal.secretName" -}}
{{- $n := upper . -}}
{{- if or (contains "PASSWORD" $n) (contains "API_KEY" $n) (contains "AUTH" $n) (contains "SECRET" $n) (contains "TOKEN" $n) -}}yes{{- end -}}
{{- end -}}
