{{/* The release's name for every object: the release name, unless it already says ft-gateway. */}}
{{- define "ft-gateway.fullname" -}}
{{- if contains "ft-gateway" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-ft-gateway" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ft-gateway.labels" -}}
app.kubernetes.io/name: ft-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ft-gateway.selector" -}}
app.kubernetes.io/name: ft-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* mode is proxy or extproc, nothing else. */}}
{{- define "ft-gateway.mode" -}}
{{- if not (has .Values.mode (list "proxy" "extproc")) -}}
{{- fail (printf "mode must be proxy or extproc, not %q" .Values.mode) -}}
{{- end -}}
{{- .Values.mode -}}
{{- end -}}

{{- define "ft-gateway.redisUrl" -}}
{{- if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else -}}
{{- printf "redis://%s-redis:6379/0" (include "ft-gateway.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The config file: what the chart sets, the mode's part, then .Values.config over both. */}}
{{- define "ft-gateway.config" -}}
{{- $mode := include "ft-gateway.mode" . -}}
{{- $base := dict "listen" (dict "host" "0.0.0.0" "port" 8080 "metrics_port" (int .Values.metricsPort)) -}}
{{- $_ := set $base "policy" (printf "/etc/ft-gateway/policy/%s" .Values.policy.file) -}}
{{- if .Values.keys.existingSecret -}}
{{- $_ := set $base "auth" (dict "keys_file" (printf "/etc/ft-gateway/keys/%s" .Values.keys.key)) -}}
{{- end -}}
{{- if eq $mode "proxy" -}}
{{- $proxy := deepCopy .Values.proxyConfig -}}
{{- if and $proxy.rate_limits (eq (default "" $proxy.rate_limits.store) "redis") -}}
{{- $_ := set $proxy.rate_limits "redis" (merge (default (dict) $proxy.rate_limits.redis) (dict "url" (include "ft-gateway.redisUrl" .))) -}}
{{- end -}}
{{- if and $proxy.store (eq (default "" $proxy.store.backend) "redis") -}}
{{- $_ := set $proxy.store "url" (include "ft-gateway.redisUrl" .) -}}
{{- end -}}
{{- $base = mergeOverwrite $base $proxy -}}
{{- else -}}
{{- $extproc := dict "host" "0.0.0.0" "port" (int .Values.extproc.port) "drain_timeout" .Values.extproc.drainTimeout -}}
{{- if .Values.extproc.profileHeader -}}
{{- $_ := set $extproc "profile_header" .Values.extproc.profileHeader -}}
{{- end -}}
{{- $_ := set $base "extproc" $extproc -}}
{{- end -}}
{{- toYaml (mergeOverwrite $base (deepCopy .Values.config)) -}}
{{- end -}}

{{/* The Service the processor is reached at, and its port. */}}
{{- define "ft-gateway.extprocHost" -}}
{{- printf "%s.%s.svc.cluster.local" (include "ft-gateway.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "ft-gateway.needsExtproc" -}}
{{- if ne (include "ft-gateway.mode" .) "extproc" -}}
{{- fail "attach.* attaches the processor to a gateway: it needs mode: extproc" -}}
{{- end -}}
{{- end -}}
