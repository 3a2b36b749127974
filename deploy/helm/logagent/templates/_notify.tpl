{{/* Names and labels of the notify Deployment: its own selector, so the main Service and
NetworkPolicy never pick its pods. */}}
{{- define "logagent.notify.fullname" -}}
{{- printf "%s-notify" (include "logagent.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "logagent.notify.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-notify" (include "logagent.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "logagent.notify.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "logagent.notify.selectorLabels" . }}
app.kubernetes.io/component: notify
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Where the sinks' secrets are mounted as files. */}}
{{- define "logagent.notify.secretDir" -}}/etc/logagent/notify{{- end }}

{{/* The secret files of the enabled sinks: file name -> {name, key} of the existing Secret. */}}
{{- define "logagent.notify.secretFiles" -}}
{{- $n := .Values.notify }}
{{- $files := dict }}
{{- if $n.slack.enabled }}{{ $_ := set $files "slack-webhook-url" $n.slack.webhookUrlSecret }}{{ end }}
{{- if $n.webhook.enabled }}
{{- $_ := set $files "webhook-url" $n.webhook.urlSecret }}
{{- $_ := set $files "webhook-secret" $n.webhook.signingSecret }}
{{- end }}
{{- if $n.github.enabled }}{{ $_ := set $files "github-token" $n.github.tokenSecret }}{{ end }}
{{- if $n.gitlab.enabled }}{{ $_ := set $files "gitlab-token" $n.gitlab.tokenSecret }}{{ end }}
{{- toJson $files }}
{{- end }}

{{/* One sink's route as LOGAGENT_NOTIFY__<SINK>__* env vars (JSON object): (list "SLACK" $route). */}}
{{- define "logagent.notify.route" -}}
{{- $prefix := printf "LOGAGENT_NOTIFY__%s__" (index . 0) }}
{{- $route := index . 1 }}
{{- $env := dict }}
{{- range $key, $name := dict "servers" "SERVERS" "tenants" "TENANTS" "statuses" "STATUSES" }}
{{- with index $route $key }}{{ $_ := set $env (print $prefix $name) (toJson .) }}{{ end }}
{{- end }}
{{- range $key, $name := dict "minConfidence" "MIN_CONFIDENCE" "ratePerMinute" "RATE_PER_MINUTE" }}
{{- if hasKey $route $key }}{{ $_ := set $env (print $prefix $name) (toString (index $route $key)) }}{{ end }}
{{- end }}
{{- range $key, $name := dict "minCount" "MIN_COUNT" "rateBurst" "RATE_BURST" }}
{{- if hasKey $route $key }}{{ $_ := set $env (print $prefix $name) (toString (int64 (index $route $key))) }}{{ end }}
{{- end }}
{{- toJson $env }}
{{- end }}
