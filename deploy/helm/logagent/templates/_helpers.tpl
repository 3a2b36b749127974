{{/* Chart name, cut to the 63 characters a label value allows. */}}
{{- define "logagent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's resources; StatefulSet pod names append "-N", so keep room. */}}
{{- define "logagent.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels every resource carries. */}}
{{- define "logagent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "logagent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the pods; never change them on upgrade (selectors are immutable). */}}
{{- define "logagent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "logagent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "logagent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "logagent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "true" when the memory lives in an object store shared by every replica, "" when it is local. */}}
{{- define "logagent.sharedMemory" -}}
{{- if regexMatch "^(s3|gs|az)://" .Values.memory.uri }}true{{ end }}
{{- end }}

{{/* "true" when local memory sits on a per-pod PersistentVolumeClaim. */}}
{{- define "logagent.usePvc" -}}
{{- if and .Values.persistence.enabled (not (include "logagent.sharedMemory" .)) }}true{{ end }}
{{- end }}

{{/* repository:tag, or repository:tag@digest when a digest pins the image. */}}
{{- define "logagent.image" -}}
{{- $image := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- if .Values.image.digest }}{{ printf "%s@%s" $image .Values.image.digest }}{{ else }}{{ $image }}{{ end }}
{{- end }}

{{/* Base URLs of every replica's endpoint, by its stable StatefulSet name (for the `helm test` pod). */}}
{{- define "logagent.endpoints" -}}
{{- $name := include "logagent.fullname" . }}
{{- $urls := list }}
{{- range $i := until (int .Values.replicaCount) }}
{{- $urls = append $urls (printf "http://%s-%d.%s.%s.svc:%d" $name $i $name $.Release.Namespace (int $.Values.http.port)) }}
{{- end }}
{{- join " " $urls }}
{{- end }}

{{/* Env var name that carries one repository's token when tokenMount is env. */}}
{{- define "logagent.tokenEnv" -}}
{{- printf "GIT_TOKEN_%s" (regexReplaceAll "[^A-Za-z0-9]" . "_" | upper) }}
{{- end }}

{{/* Where the container sees its files; fixed so the ConfigMap and the mounts agree. */}}
{{- define "logagent.dataDir" -}}/var/lib/logagent{{- end }}
{{- define "logagent.repoCacheDir" -}}/var/cache/logagent/repos{{- end }}
{{- define "logagent.configDir" -}}/etc/logagent{{- end }}
{{- define "logagent.tokenDir" -}}/etc/logagent/git-tokens{{- end }}

{{/* The server -> repository map the service reads from LOGAGENT_REPOS_FILE. */}}
{{- define "logagent.reposJson" -}}
{{- $out := dict }}
{{- range $id, $repo := .Values.repos }}
{{- $spec := dict "url" $repo.url "branch" (default "main" $repo.branch) }}
{{- with $repo.tokenSecret }}
{{- if eq (default "file" $repo.tokenMount) "env" }}
{{- $_ := set $spec "token_env" (include "logagent.tokenEnv" $id) }}
{{- else }}
{{- $_ := set $spec "token_file" (printf "%s/%s" (include "logagent.tokenDir" $) $id) }}
{{- end }}
{{- end }}
{{- $_ := set $out $id $spec }}
{{- end }}
{{- toPrettyJson $out }}
{{- end }}
