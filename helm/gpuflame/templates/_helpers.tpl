{{- define "gpuflame.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuflame.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
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

{{- define "gpuflame.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the basic-auth password, if any. */}}
{{- define "gpuflame.authSecret" -}}
{{- if .Values.pyroscope.basicAuth.existingSecret -}}
{{- .Values.pyroscope.basicAuth.existingSecret -}}
{{- else if .Values.pyroscope.basicAuth.password -}}
{{- include "gpuflame.fullname" . -}}
{{- end -}}
{{- end -}}
