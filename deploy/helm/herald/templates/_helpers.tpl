{{/* The chart's names, labels and the parts every Herald pod shares. */}}

{{- define "herald.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "herald.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "herald.labels" -}}
{{ include "herald.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "herald.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "herald.secret" -}}
{{- required "existingSecret: name the Secret holding HERALD_DATABASE_URL, HERALD_REDIS_URL, HERALD_SECRET_KEYS and HERALD_ADMIN_API_KEY" .Values.existingSecret -}}
{{- end -}}

{{/* Settings as env (not a ConfigMap: the migration hook runs before any of the release's
     resources exist), the Secret by reference, and the role. */}}
{{- define "herald.env" -}}
envFrom:
  - secretRef: {name: {{ include "herald.secret" .root }}}
env:
  - {name: HERALD_ROLE, value: {{ .role }}}
  - {name: HERALD_API_URL, value: {{ printf "http://%s-api:%v" (include "herald.fullname" .root) .root.Values.api.service.port | quote }}}
{{- range $name, $value := .root.Values.config }}
  - {name: {{ $name }}, value: {{ $value | toString | quote }}}
{{- end }}
{{- end -}}

{{- define "herald.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: ["ALL"]}
{{- end -}}

{{- define "herald.podSpec" -}}
securityContext: {runAsNonRoot: true, runAsUser: 10001}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pods of a release wait until the schema is its release's (or a later one's, on a
     rollback): never against a database still being migrated. */}}
{{- define "herald.waitForSchema" -}}
- name: wait-for-schema
  image: {{ include "herald.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args: ["herald", "migrate", "--wait"]
  {{- include "herald.env" (dict "root" .root "role" .role) | nindent 2 }}
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 128Mi}
  {{- include "herald.containerSecurity" . | nindent 2 }}
{{- end -}}
