{{- define "gpuflame.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-name-chart, or fullnameOverride; the release name alone when it already holds the name. */}}
{{- define "gpuflame.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where the namespaced objects go: namespaceOverride (umbrella charts), else the release's. */}}
{{- define "gpuflame.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "gpuflame.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuflame.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuflame.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gpuflame.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "gpuflame.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpuflame.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
[registry/]repository, then @digest when one is given (it pins the image; the
tag is then only informative), else :tag (default: the chart's appVersion).
global.imageRegistry, as in Grafana's and Bitnami's charts, wins over
image.registry; an empty registry leaves the repository as written.
*/}}
{{- define "gpuflame.image" -}}
{{- $registry := default .Values.image.registry ((.Values.global).imageRegistry) -}}
{{- $repository := .Values.image.repository -}}
{{- if $registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" $registry) $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the basic-auth password, if any. */}}
{{- define "gpuflame.authSecret" -}}
{{- if .Values.pyroscope.basicAuth.existingSecret -}}
{{- .Values.pyroscope.basicAuth.existingSecret -}}
{{- else if .Values.pyroscope.basicAuth.password -}}
{{- include "gpuflame.fullname" . -}}
{{- end -}}
{{- end -}}
